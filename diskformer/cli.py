"""The `diskformer` command: one entry point, each subcommand in its own module.

Each subcommand module exposes `main(argv) -> int` and parses its own arguments, so commands stay independent
and importing one never drags in another's dependencies (numpy, uvicorn, ...).
"""
import importlib
import sys

# name -> (module, one-line help)
COMMANDS = {
    "serve": ("diskformer.server", "serve the chat page, the engine, Pyodide and local models on 127.0.0.1"),
    "tokenize": ("diskformer.commands.tokenize", "print a text's token ids as JSON"),
    "detokenize": ("diskformer.commands.detokenize", "print the text of token ids as JSON"),
    "reference": ("diskformer.reference.cli", "run the numpy reference model: greedy ids and per-step top-k log-probs"),
    "ingest": ("diskformer.commands.ingest", "stream a GGUF into a model store folder (resumable; repairs damage)"),
    "verify": ("diskformer.commands.verify", "check every checksum of a model store folder"),
    "run": ("diskformer.engine_run", "run the WebGPU engine headless (Pyodide + Dawn in Node)"),
    "bench": ("lab.bench", "benchmark the engine as shipped (Pyodide + Dawn) against the bandwidth bound"),
    "bench-tab-vs-node": ("lab.browser_bench.compare", "the bench in a Chromium tab beside Node + Dawn, figure by figure"),
    "bench-uploads": ("lab.bench_uploads", "expert-record upload throughput: staging ring vs writeBuffer"),
    "gate": ("diskformer.gate.cli", "gate the chat page headless against llama.cpp's greedy replies"),
    "policy-lab": ("lab.policy_lab.cli", "replay expert-routing traces through the streamer's cache policies"),
}


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: diskformer COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "Run `diskformer COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"diskformer: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        print(f"diskformer {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one readable line, never a traceback
        detail = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        print(f"diskformer {name}: unexpected error: {detail} (a bug: please report it with the command line)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
