# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RECORD rows for the test trees: the collection only reads RECORD files, pip writes them."""
import base64
import hashlib


def encode_hash(algorithm, data):
    """The RECORD form of the digest of ``data`` (bytes), as pip writes it."""
    digest = hashlib.new(algorithm, data).digest()
    return "%s=%s" % (algorithm, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii"))
