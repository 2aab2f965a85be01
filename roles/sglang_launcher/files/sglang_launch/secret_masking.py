# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keep the API key out of what SGLang logs, serves and dumps from its arguments."""

import copy
import dataclasses
import functools
import logging
import sys

MASK = "<hidden>"


class MaskingUnavailable(Exception):
    """The SGLang release writes or serves its arguments somewhere the launcher cannot mask."""


class SecretMasking(object):
    """Keep the secret option values out of what SGLang logs, serves and dumps.

    SGLang holds the key in its ServerArgs and in sys.argv, and each release writes them out its
    own way. 0.5.9 logs ``f"{server_args=}"`` (ServerArgs.__repr__), serves
    ``dataclasses.asdict(server_args)`` at /server_info and pickles ``server_args`` with
    ``" ".join(sys.argv)`` into its crash and request dumps (TokenizerManager._dump_data_to_file,
    dump_requests_before_crash). 0.5.23 logs, serves and dumps dicts from
    ``ServerArgs.resolved_dict()`` that go through its own redaction of watermark secrets
    (sampling/watermarking/core.py: redact_watermark_secrets reads WATERMARK_SECRET_FIELD_NAMES),
    keeps the command line as ``server_args.launch_command``, and dumps the ServerArgs object
    itself from TokenizerManager._server_args_for_dump.

    Every hook masks a copy made for output and never the object the server reads its key
    from: a mask that became the key would be a key everyone knows. The launcher looks for
    each of these places by what the release has, not by its version, and raises
    MaskingUnavailable when it finds none that it knows for one of them: then the server does
    not start, rather than write the key in clear. A filter on every log record of the process
    also replaces the values themselves, for any line these hooks do not know of.
    """

    def __init__(self, values):
        self.values = dict((field, value) for field, value in values.items() if value)
        self.redact = None

    def scrub(self, text):
        for value in self.values.values():
            text = text.replace(value, MASK)
        return text

    def leaks(self, text):
        return any(value in text for value in self.values.values())

    def install(self):
        try:
            from sglang.srt import server_args as server_args_module
        except Exception as exc:
            raise MaskingUnavailable("cannot import sglang.srt.server_args: %s" % exc)
        server_args_class = getattr(server_args_module, "ServerArgs", None)
        prepare = getattr(server_args_module, "prepare_server_args", None)
        if not isinstance(server_args_class, type) or not callable(prepare):
            raise MaskingUnavailable("sglang.srt.server_args has no ServerArgs class or prepare_server_args()")
        self._mask_log_records()
        self._replace(server_args_module, "prepare_server_args", self._masking_after_parse(prepare))
        self._mask_repr(server_args_class)
        if dataclasses.is_dataclass(server_args_class):
            self._mask_asdict(server_args_class)
        elif callable(getattr(server_args_class, "resolved_dict", None)):
            self._extend_release_redaction()
        else:
            raise MaskingUnavailable("ServerArgs is neither a dataclass nor has resolved_dict(): no known way "
                                     "to mask what /server_info serves")
        self._mask_dumps()

    @staticmethod
    def _replace(module, name, replacement):
        # Modules that imported the name before this point hold the original: point them at
        # the replacement too, so that import order does not decide what is masked.
        original = getattr(module, name)
        for loaded in list(sys.modules.values()):
            namespace = getattr(loaded, "__dict__", None)
            if isinstance(namespace, dict) and namespace.get(name) is original:
                namespace[name] = replacement
        setattr(module, name, replacement)

    def _mask_log_records(self):
        get_message = logging.LogRecord.getMessage
        masking = self

        def getMessage(record):
            return masking.scrub(get_message(record))

        logging.LogRecord.getMessage = getMessage

    def _mask_repr(self, server_args_class):
        original = server_args_class.__repr__
        masking = self

        def __repr__(server_args):
            return masking.scrub(original(server_args))

        server_args_class.__repr__ = __repr__

    def _mask_asdict(self, server_args_class):
        # In the server process dataclasses.asdict(server_args) only builds what /server_info
        # (and Engine.get_server_info, the gRPC server's info) return; nothing rebuilds
        # ServerArgs from it there.
        original = dataclasses.asdict
        masking = self

        def asdict(obj, *, dict_factory=dict):
            result = original(obj, dict_factory=dict_factory)
            if isinstance(obj, server_args_class) and isinstance(result, dict):
                for field in masking.values:
                    if result.get(field):
                        result[field] = MASK
            return result

        self._replace(dataclasses, "asdict", asdict)

    def _extend_release_redaction(self):
        try:
            from sglang.srt.sampling.watermarking import core
        except Exception as exc:
            raise MaskingUnavailable("ServerArgs has resolved_dict() but its redaction cannot be imported: %s" % exc)
        names = getattr(core, "WATERMARK_SECRET_FIELD_NAMES", None)
        redact = getattr(core, "redact_watermark_secrets", None)
        if not isinstance(names, (set, frozenset)) or not callable(redact):
            raise MaskingUnavailable("sglang.srt.sampling.watermarking.core has no WATERMARK_SECRET_FIELD_NAMES "
                                     "and redact_watermark_secrets() to extend")
        # The release redacts every log line, /server_info and dump through this one function,
        # which reads the names at each call: the keys join the watermark's secrets there.
        core.WATERMARK_SECRET_FIELD_NAMES = frozenset(names) | frozenset(self.values)
        probe = dict((field, value) for field, value in self.values.items())
        if self.leaks(repr(redact({"server_args": probe, "nested": [probe]}))):
            raise MaskingUnavailable("redact_watermark_secrets() does not hide further field names")
        self.redact = redact

    def masked(self, server_args):
        """A copy of ``server_args`` (object or dict) for output, the secret fields masked."""
        if self.redact is not None:
            return self.redact(server_args)
        if isinstance(server_args, dict):
            return dict((key, MASK if key in self.values and value else value) for key, value in server_args.items())
        if server_args is None:
            return None
        masked = copy.copy(server_args)
        for field in self.values:
            if getattr(masked, field, None):
                object.__setattr__(masked, field, MASK)
        return masked

    def _mask_dumps(self):
        try:
            from sglang.srt.managers.tokenizer_manager import TokenizerManager
        except Exception as exc:
            raise MaskingUnavailable("cannot import TokenizerManager, which writes the dumps: %s" % exc)
        masking = self
        if callable(getattr(TokenizerManager, "_server_args_for_dump", None)):
            original = TokenizerManager._server_args_for_dump

            def _server_args_for_dump(manager):
                return masking.masked(original(manager))

            TokenizerManager._server_args_for_dump = _server_args_for_dump
            return
        dumpers = ("_dump_data_to_file", "dump_requests_before_crash")
        if not all(callable(getattr(TokenizerManager, name, None)) for name in dumpers):
            raise MaskingUnavailable("TokenizerManager has neither _server_args_for_dump() nor %s()"
                                     % "() and ".join(dumpers))
        for name in dumpers:
            setattr(TokenizerManager, name, self._with_masked_server_args(getattr(TokenizerManager, name)))

    def _with_masked_server_args(self, dumper):
        # These methods put self.server_args into the pickle they write. Both are synchronous,
        # so no other coroutine of the event loop sees the copy while they run.
        masking = self

        @functools.wraps(dumper)
        def dump(manager, *args, **kwargs):
            live = manager.server_args
            manager.server_args = masking.masked(live)
            try:
                return dumper(manager, *args, **kwargs)
            finally:
                manager.server_args = live

        return dump

    def _masking_after_parse(self, prepare):
        masking = self

        @functools.wraps(prepare)
        def prepare_server_args(*args, **kwargs):
            server_args = prepare(*args, **kwargs)
            masking.mask_parsed(server_args)
            return server_args

        return prepare_server_args

    def mask_parsed(self, server_args):
        """Mask the command line SGLang keeps, once it has read the key from it, and check every
        output the launcher knows of on the real object before the server starts."""
        # The dumps write " ".join(sys.argv); 0.5.23 keeps it as launch_command as well.
        sys.argv[:] = [self.scrub(argument) for argument in sys.argv]
        command = getattr(server_args, "_launch_command", None)
        if isinstance(command, str) and self.leaks(command):
            try:
                server_args._launch_command = self.scrub(command)
            except Exception as exc:
                raise MaskingUnavailable("cannot mask ServerArgs.launch_command: %s" % exc)
        problems = []
        for field, value in self.values.items():
            if getattr(server_args, field, None) != value:
                problems.append("ServerArgs.%s does not hold the key it was given" % field)
        outputs = [("repr(ServerArgs)", lambda: repr(server_args)),
                   ("sys.argv", lambda: " ".join(sys.argv)),
                   ("launch_command", lambda: str(getattr(server_args, "launch_command", "")))]
        if dataclasses.is_dataclass(server_args):
            outputs.append(("dataclasses.asdict(ServerArgs)",
                            lambda: repr(sorted(dataclasses.asdict(server_args).items()))))
        masked = self.masked(server_args)
        outputs.append(("the ServerArgs of the dumps",
                        lambda: " ".join(str(getattr(masked, field, None)) for field in self.values)))
        for name, render in outputs:
            try:
                text = render()
            except Exception as exc:
                problems.append("%s: %s" % (name, exc))
                continue
            if self.leaks(text):
                problems.append("%s shows the key" % name)
        if problems:
            raise MaskingUnavailable("; ".join(problems))
