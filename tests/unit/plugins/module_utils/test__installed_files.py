# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a role's files a node lacks, from one ansible.builtin.find listing of its copies."""

import hashlib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.inferops.serving.plugins.filter.files import files_out_of_date
from ansible_collections.inferops.serving.plugins.module_utils._installed_files import out_of_date

DEST = '/usr/local/libexec/sglang_launch'


def found(name, checksum, mode='0644', owner='root', group='root'):
    """One entry of find's files, with the fields it reports (get_checksum=true)."""
    return {'path': DEST + '/' + name, 'checksum': checksum, 'mode': mode, 'pw_name': owner, 'gr_name': group,
            'isreg': True, 'size': 1, 'uid': 0, 'gid': 0}


def test_a_node_that_holds_every_file_as_it_should_needs_no_copy():
    wanted = {'a.py': 'aa', 'b.py': 'bb'}
    assert out_of_date(wanted, [found('a.py', 'aa'), found('b.py', 'bb')], DEST, '0644', 'root', 'root') == []


@pytest.mark.parametrize('entry', [
    found('b.py', 'edited'),
    found('b.py', 'bb', mode='0600'),
    found('b.py', 'bb', owner='nobody'),
    found('b.py', 'bb', group='staff'),
], ids=['content', 'mode', 'owner', 'group'])
def test_a_file_that_differs_in_any_way_is_copied_again(entry):
    assert out_of_date({'a.py': 'aa', 'b.py': 'bb'}, [found('a.py', 'aa'), entry], DEST, '0644', 'root', 'root') == ['b.py']


def test_a_fresh_node_gets_every_file_in_name_order():
    assert out_of_date({'z.py': 'z', 'a.py': 'a', '_t/b.py': 'b'}, [], DEST, '0644', 'root', 'root') == ['_t/b.py', 'a.py', 'z.py']


def test_files_in_subfolders_are_matched_by_their_path_under_the_destination():
    listing = [found('_topology/common.py', 'cc'), found('common.py', 'other')]
    assert out_of_date({'_topology/common.py': 'cc'}, listing, DEST, '0644', 'root', 'root') == []


def test_files_the_role_does_not_ship_are_left_alone():
    assert out_of_date({'a.py': 'aa'}, [found('a.py', 'aa'), found('old.py', 'oo')], DEST, '0644', 'root', 'root') == []


def test_the_filter_hashes_the_controllers_files(tmp_path):
    (tmp_path / 'a.py').write_bytes(b'print("a")\n')
    (tmp_path / 'b.py').write_bytes(b'print("b")\n')
    same = found('a.py', hashlib.sha1(b'print("a")\n').hexdigest())
    # The file lookup strips a trailing newline; the filter hashes the bytes as copy does.
    stripped = found('b.py', hashlib.sha1(b'print("b")').hexdigest())
    assert files_out_of_date(['a.py', 'b.py'], str(tmp_path), [same, stripped], DEST, '0644') == ['b.py']


def test_a_missing_source_file_names_the_file(tmp_path):
    with pytest.raises(AnsibleFilterError, match='cannot read .*/gone.py'):
        files_out_of_date(['gone.py'], str(tmp_path), [], DEST, '0644')
