# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's stand-in for SGLang's console script `sglang` (sglang.cli)."""
