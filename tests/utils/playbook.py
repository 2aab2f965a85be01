# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run ansible-playbook and read what it did as data: Ansible's JSON callback, not its printed lines.

With the stdout callback ``ansible.posix.json`` (ansible-core 2.19 to 2.21 redirect the short name
``json`` to it; the ``ansible`` package pinned beside each ansible-core bundles it), a playbook prints
one JSON document when it ends: each task's result per host and its times, and the recap's counts
per host. PlaybookRun reads that document from a run's output, also when other commands printed
around it (``make demo``, a README block of several commands), and answers the questions the tests
and the benchmarks ask: the recap of a host, the tasks a run reached and their results, the messages
of the failed tasks, the closing message a refused or rolled-back run ends with, the time each task
took. run_scenario_playbook() runs a playbook from a molecule scenario's tests, against its inventory.

Imported as ``ansible_collections.inferops.serving.tests.utils.playbook`` by the tests and by bench/:
both put ``.collections`` on the import path, where Ansible finds the collection too.
"""

import collections
import datetime
import json
import os
import re
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
# One line per playbook: found by its first character among the lines other commands print.
JSON_OUTPUT = {'ANSIBLE_STDOUT_CALLBACK': 'ansible.posix.json', 'ANSIBLE_JSON_INDENT': '0'}

# The task every refused or rolled-back run of the collection ends with: one summary of why, last.
CLOSING_TASK = 'Say what was refused or rolled back'

Recap = collections.namedtuple('Recap', 'ok changed unreachable failed skipped rescued ignored')


def checkout_environment(base=None, **extra):
    """BASE (default: this process's environment) as `make` sets it for Ansible in this checkout,
    with the JSON output and EXTRA."""
    env = dict(os.environ if base is None else base)
    env.update({'ANSIBLE_CONFIG': os.path.join(REPO_ROOT, 'ansible.cfg'),
                'ANSIBLE_COLLECTIONS_PATH': os.path.join(REPO_ROOT, '.collections'),
                'ANSIBLE_NOCOLOR': '1'})
    env.update(JSON_OUTPUT)
    env.update(extra)
    return env


def run_playbook(arguments, env=None, cwd=REPO_ROOT, timeout=None):
    """ansible-playbook ARGUMENTS (the one beside this Python) in CWD, read as a PlaybookRun.

    ENV defaults to checkout_environment(); a given ENV is used as it is, plus the JSON output."""
    env = checkout_environment() if env is None else dict(env, **JSON_OUTPUT)
    proc = subprocess.run([ANSIBLE_PLAYBOOK] + list(arguments), cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False)
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr)


def run_scenario_playbook(*arguments):
    """ansible-playbook ARGUMENTS as the operator types it in the checkout, against the inventory of
    the molecule scenario whose tests call it (molecule's environment: its inventory, the scenario's
    Ansible home and collections), as a PlaybookRun."""
    return run_playbook(['-i', os.environ['MOLECULE_INVENTORY_FILE']] + list(arguments), env=os.environ)


def _text(message):
    if isinstance(message, str):
        return message
    if isinstance(message, list) and all(isinstance(line, str) for line in message):
        return '\n'.join(message)
    return json.dumps(message, sort_keys=True)


def _failed(result):
    if 'failed' in result or 'unreachable' in result:
        return bool(result.get('failed') or result.get('unreachable'))
    # ansible-core 2.21 leaves `failed` out of a loop's item results; a failed item keeps its exception.
    return 'exception' in result


def _items(result):
    return [item for item in result.get('results') or [] if isinstance(item, dict)]


def _messages(result, failed_only=False):
    """What a task result says: its msg, else its error output, and what its loop's items say. With
    FAILED_ONLY, a loop says what its failed items say, not its own 'One or more items failed'."""
    if failed_only and _items(result):
        return [message for item in _items(result) if _failed(item) for message in _messages(item, True)]
    said = [_text(result[key]) for key in ('msg', 'stderr', 'module_stderr') if result.get(key)][:1]
    return said + [message for item in _items(result) for message in _messages(item, failed_only)]


def _without_role(task_name):
    return task_name.split(' : ', 1)[-1]


def _moment(stamp):
    """Seconds since the epoch of one of the JSON callback's UTC time stamps."""
    moment = datetime.datetime.strptime(stamp, '%Y-%m-%dT%H:%M:%S.%fZ')
    return (moment - datetime.datetime(1970, 1, 1)).total_seconds()


def _collapsed(text):
    return ' '.join(text.split())


class PlaybookRun(object):
    """One command's exit status and output, with the last playbook it ran read as data."""

    def __init__(self, returncode, output, errors=''):
        self.returncode = returncode
        # Everything printed, the JSON's every field included (a secret must be in none).
        self.output = output + '\n' + errors
        self.documents = []
        other = []
        for line in self.output.splitlines():
            document = None
            if line.startswith('{'):
                try:
                    document = json.loads(line)
                except ValueError:
                    pass
            if isinstance(document, dict) and 'plays' in document and 'stats' in document:
                self.documents.append(document)
            else:
                other.append(line)
        # What was printed beside the JSON: Ansible's warnings and errors, other commands' output.
        self.text = '\n'.join(other)
        last = self.documents[-1] if self.documents else {'plays': [], 'stats': {}}
        self.recap = {host: Recap(counts['ok'], counts['changed'], counts['unreachable'], counts['failures'],
                                  counts['skipped'], counts['rescued'], counts['ignored'])
                      for host, counts in last['stats'].items()}
        self._plays = last['plays']
        # (host, task name, result) in the order the tasks ran.
        self.results = [(host, task['task']['name'], result)
                        for play in last['plays'] for task in play['tasks']
                        for host, result in task['hosts'].items()]

    def tasks(self, host):
        """HOST's results by task name (the last result of a name that ran more than once)."""
        return dict((name, result) for each_host, name, result in self.results if each_host == host)

    def task_names(self, host=None):
        """The names of the tasks the run reached (HOST's, or every host's; skipped ones too), in
        order, without the name of their role (`inferops.serving.gpu_vm : Install the driver` is
        `Install the driver`)."""
        return [_without_role(name) for each_host, name, _result in self.results
                if host is None or each_host == host]

    def results_named(self, prefix, host=None):
        """The results of the tasks whose name (without its role's) starts with PREFIX (HOST's, or
        every host's), in the order they ran."""
        return [result for each_host, name, result in self.results
                if (host is None or each_host == host) and _without_role(name).startswith(prefix)]

    def task_seconds(self):
        """Seconds per task name (without its role's), summed over the tasks of that name: from a
        task's start to its last host's result, as the JSON callback times them."""
        seconds = collections.OrderedDict()
        for play in self._plays:
            for task in play['tasks']:
                duration = task['task'].get('duration') or {}
                if 'start' in duration and 'end' in duration:
                    name = _without_role(task['task']['name'])
                    seconds[name] = seconds.get(name, 0.0) + (_moment(duration['end']) - _moment(duration['start']))
        return seconds

    def closing_message(self):
        """The run's last words, white space collapsed: the message of the last task it reached,
        which must be the closing message (CLOSING_TASK)."""
        names = self.task_names()
        assert names and names[-1].startswith(CLOSING_TASK), (names[-5:], self.summary)
        return _collapsed(_text(self.results[-1][2].get('msg', '')))

    def failures(self, host=None):
        """The messages of the failed and unreachable tasks (HOST's, or every host's), in order."""
        return [message for each_host, _name, result in self.results
                if (host is None or each_host == host) and _failed(result) for message in _messages(result, True)]

    def messages(self):
        """Every message of every task result, then the lines printed beside the JSON."""
        return [message for _host, _name, result in self.results for message in _messages(result)] + [self.text]

    def said(self, words):
        """Whether a message of the run holds WORDS, white space collapsed (lines fold long messages)."""
        words = _collapsed(words)
        return any(words in _collapsed(message) for message in self.messages())

    def matches(self, pattern):
        """Whether a message of the run matches the regular expression PATTERN, white space collapsed."""
        return any(re.search(pattern, _collapsed(message)) for message in self.messages())

    @property
    def summary(self):
        """What a failed assertion shows (pytest shortens any other object): the exit status, the
        recap, the failed tasks, the tail of the other output."""
        lines = ['ansible-playbook exited %d; %d playbook(s) read' % (self.returncode, len(self.documents))]
        lines.extend('%s: %s' % (host, ' '.join('%s=%d' % pair for pair in recap._asdict().items()))
                     for host, recap in sorted(self.recap.items()))
        lines.extend('failed: %s: %s: %s' % (host, name, ' | '.join(_messages(result, True)))
                     for host, name, result in self.results if _failed(result))
        lines.append(self.text[-3000:])
        return '\n'.join(lines)

    def __str__(self):
        return self.summary
