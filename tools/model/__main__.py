"""python -m tools.model download|generate|chat ... (tools/model/__init__.py says what each does)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from core.names import CHECKPOINT_PREFIX, legacy_prefix, server_name
from tools.cli import count, guarded, positive, stack_name

ROOT = Path(__file__).resolve().parents[2]
EX_NOINPUT, EX_UNAVAILABLE, EX_CONFIG = 66, 69, 78


def default_dir(stack: str, run: str, step: int | None = None) -> Path:
    """Where `make download` puts a run's export (models/ is git-ignored), and `make generate` looks."""
    return ROOT / "models" / stack / (run if step is None else f"{run}-step{step}")


def _device(text: str) -> str:
    """argparse's type for --device: the torch device strings generate uses."""
    if text not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:[0-9]{1,2}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device: auto, cpu, cuda or cuda:<n>")
    return text


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tools.model", description="A run's model, after training.")
    sub = parser.add_subparsers(dest="command", required=True)
    down = sub.add_parser("download", help="a run's export (or a checkpoint) from the bucket to this machine")
    down.add_argument("--stack", required=True, type=stack_name)
    down.add_argument("--run")
    down.add_argument("--dir", type=Path, help="default: models/<stack>/<run>/")
    down.add_argument("--checkpoint", type=count, metavar="STEP", help="that checkpoint instead of the export")
    down.add_argument("--force", action="store_true", help="download into a directory that holds something else")
    down.add_argument("--quiet", action="store_true", help="no progress bar")
    down.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    gen = sub.add_parser("generate", help="an exported directory's answer to a prompt, streamed")
    gen.add_argument("--dir", type=Path, required=True)
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--system")
    gen.add_argument("--max-new-tokens", type=positive, default=256)
    gen.add_argument("--device", default="auto", type=_device,
                     help="cpu, cuda, cuda:<n>, or auto (a GPU where there is one)")
    talk = sub.add_parser("chat", help="talk to the stack's model server (`serve:`) with the OpenAI client")
    talk.add_argument("--stack", type=stack_name)
    talk.add_argument("--url", help="the server's base URL (.../v1) instead of a port-forward of its Service")
    talk.add_argument("--prompt", help="one prompt, answered; default: a conversation typed here")
    talk.add_argument("--system")
    talk.add_argument("--max-tokens", type=positive, default=512)
    talk.add_argument("--context", help="the kubeconfig context of the stack's cluster (default: the current one)")
    talk.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _stack(stack: str, root: Path):
    from stack.problems import ConfigError  # pylint: disable=import-outside-toplevel
    from stack.reader import load_files  # pylint: disable=import-outside-toplevel

    try:
        return load_files(stack, root)
    except (ConfigError, FileNotFoundError) as err:
        raise SystemExit(_fail(f"stack {stack}: {err}", EX_CONFIG)) from None


def _fail(message: str, code: int) -> int:
    print(f"model: {message}", file=sys.stderr, flush=True)
    return code


def _the_run(config, run: str | None, need_export: bool) -> str:
    names = [r.name for r in config.runs if r.export is not None or not need_export]
    if run is None and len(names) == 1:
        return names[0]
    if run not in names:
        what = "runs with `export:`" if need_export else "runs"
        raise SystemExit(_fail(f"{run!r} is not one of stack {config.stack}'s {what}: {', '.join(names) or '(none)'}"
                               + ("" if run is None else "; add `export:` to the run, and `make up`"), EX_NOINPUT))
    return run


def download_command(args) -> int:
    from tools.model import download as dl  # pylint: disable=import-outside-toplevel

    config = _stack(args.stack, args.root)
    run = _the_run(config, args.run, need_export=args.checkpoint is None)
    target = args.dir or default_dir(args.stack, run, args.checkpoint)
    try:
        from google.cloud import storage  # pylint: disable=import-outside-toplevel

        bucket = storage.Client(project=config.project).bucket(config.data_bucket)
        if args.checkpoint is None:
            prefix = config.export_prefixes()[run]
            marker, files = dl.export_plan(bucket, prefix)
        else:
            bases = (config.bucket_layout.run(run).checkpoints, legacy_prefix(CHECKPOINT_PREFIX, run))
            marker, (prefix, files) = None, dl.checkpoint_plan(bucket, bases, args.checkpoint)
        dl.check_target(target, marker, files, args.force)
        fetched, kept = dl.download(bucket, prefix, files, target, args.quiet)
    except dl.DownloadError as err:
        return _fail(str(err), err.code)
    except Exception as err:  # pylint: disable=broad-except  # no credentials, no network: said in one line
        return _fail(f"gs://{config.data_bucket} cannot be read: {type(err).__name__}: {err}", EX_UNAVAILABLE)
    print(f"gs://{config.data_bucket}/{prefix}/ -> {target}: {fetched} files downloaded, {kept} already there, "
          "every checksum verified")
    if args.checkpoint is None:
        print(f"try it: make generate STACK={args.stack} RUN={run} PROMPT='...'"
              + (f" DIR={target}" if args.dir else ""))
    return 0


def generate_command(args) -> int:
    from tools.model import generate as gen  # pylint: disable=import-outside-toplevel

    try:
        model, tokenizer, marker = gen.load(str(args.dir), args.device)
    except gen.NotLoadable as err:
        return _fail(f"{err}; `make download` brings a run's export here", EX_NOINPUT)
    print(f"[{args.dir}: {marker.get('trainer')} run {marker.get('run') or '-'}, step {marker.get('step')}, "
          f"on {model.device}]", file=sys.stderr, flush=True)
    gen.stream(model, tokenizer, args.prompt, args.max_new_tokens, args.system)
    return 0


def chat_command(args) -> int:
    from tools.model import chat  # pylint: disable=import-outside-toplevel

    try:
        if args.url:
            return chat.chat(args.url, None, args.prompt, args.system, args.max_tokens)
        if not args.stack:
            return _fail("chat: set STACK=<stack> (or --url of a server)", 2)
        config = _stack(args.stack, args.root)
        if config.serve is None:
            return _fail(f"stack {args.stack} declares no model server: add `serve: {{run: <a run with export:>, "
                         "pool: <pool>, image: vllm/vllm-openai@sha256:...}`, and `make up`", EX_CONFIG)
        with chat.port_forward(config.runs_namespace, server_name(config.serve.run), args.context) as url:
            return chat.chat(url, config.serve.run, args.prompt, args.system, args.max_tokens)
    except chat.ChatError as err:
        return _fail(str(err), err.code)


COMMANDS = {"download": download_command, "generate": generate_command, "chat": chat_command}


def main(argv=None) -> int:
    args = _parse(argv)
    return guarded(f"model {args.command}", lambda: _main(args))


def _main(args) -> int:
    try:
        return COMMANDS[args.command](args)
    except SystemExit as done:
        return int(done.code or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
