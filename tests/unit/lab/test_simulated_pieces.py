# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab page's list of what the lab simulates names every program the lab has for it."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
LAB = os.path.join(REPO_ROOT, 'molecule', 'resources', 'lab')
# Run on a real GPU host to capture what the simulation follows; it simulates nothing.
NOT_A_SIMULATION = {'capture-nvidia.sh'}


def readme_paragraph():
    with open(os.path.join(REPO_ROOT, 'docs', 'lab.md')) as handle:
        text = handle.read()
    start = text.index('The programs the lab simulates')
    return text[start:text.index('\n\n', start)]


def simulated_programs():
    programs = set()
    for name in os.listdir(os.path.join(LAB, 'sim')):
        path = os.path.join(LAB, 'sim', name)
        # Programs only: a test that imports a simulator leaves a __pycache__ folder here.
        if os.path.isfile(path) and os.access(path, os.X_OK) and name not in NOT_A_SIMULATION:
            programs.add('sim/' + name)
    packages = os.path.join(LAB, 'apt-repo', 'packages')
    for folder, _dirs, files in os.walk(packages):
        if os.path.basename(folder) == 'bin':
            programs.update(files)
    programs.add('hub_sim/hub_sim.py')
    programs.add('sglang_sim')
    return programs


def test_the_lab_page_names_every_simulated_program():
    paragraph = readme_paragraph()
    programs = simulated_programs()
    assert {'sim/nvidia-smi', 'sim/qm', 'sim/torch-python', 'nvcc', 'nvidia-persistenced'} <= programs
    missing = sorted(p for p in programs if '`%s`' % p not in paragraph)
    assert missing == [], 'docs/lab.md, "What the lab simulates", does not name %s' % ', '.join(missing)


def test_the_readme_counts_them_right():
    # The count in words: the generators of sysfs trees write files, the rest run as processes.
    programs = [p for p in simulated_programs() if not os.path.basename(p).startswith('make-')]
    words = {6: 'six', 7: 'seven', 8: 'eight', 9: 'nine'}
    assert 'are these %s,' % words[len(programs)] in readme_paragraph()
