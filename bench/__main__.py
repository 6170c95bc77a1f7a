"""``python -m bench``: measure, print the table, exit 0 (or 1 with
``--strict`` when a target is missed)."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench import ingest, reads, recorded_stream, startup
from bench.dataset import counts, fill, make_app
from bench.report import Figure, markdown, table

PARTS = ("reads", "start", "ingest")

FULL = {"memories": (1_000, 100_000), "events": (1_000, 1_000_000), "start_memories": (100, 100_000),
        "stream_lines": 50_000, "stream_markers": 10_000, "memory_lines": (10_000, 50_000),
        "repeat": 7, "ingest_repeat": 3}
QUICK = {"memories": (200, 5_000), "events": (200, 50_000), "start_memories": (20, 5_000),
         "stream_lines": 3_000, "stream_markers": 600, "memory_lines": (600, 3_000),
         "repeat": 3, "ingest_repeat": 1}


def _pair(text: str) -> tuple[int, int]:
    try:
        small, large = (int(part.replace("_", "")) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SMALL,LARGE (two whole numbers), not {text!r}") from None
    if not 0 < small < large:
        raise argparse.ArgumentTypeError(f"expected 0 < SMALL < LARGE, not {text!r}")
    return small, large


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, not {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bench/run",
        description="Measure how Claude Ops' reads and stream ingest scale. Every figure is a ratio "
                    "measured in this one run (large size against small, pipeline against a bare loop); "
                    "PASS/FAIL against its target is information: the exit status is 0 unless --strict.")
    p.add_argument("--quick", action="store_true",
                   help="small sizes (a minute or so) instead of the full ones; explicit sizes still win")
    p.add_argument("--only", default=",".join(PARTS),
                   help=f"comma-separated parts to run, of {', '.join(PARTS)} (default: all)")
    p.add_argument("--memories", type=_pair, metavar="SMALL,LARGE",
                   help=f"memories for the read figures and the ingest scaling figure (default {FULL['memories'][0]},{FULL['memories'][1]})")
    p.add_argument("--events", type=_pair, metavar="SMALL,LARGE",
                   help=f"events for the read figures (default {FULL['events'][0]},{FULL['events'][1]})")
    p.add_argument("--start-memories", type=_pair, metavar="SMALL,LARGE",
                   help="memories for the session start figure (default "
                        f"{FULL['start_memories'][0]},{FULL['start_memories'][1]})")
    p.add_argument("--stream-lines", type=_positive, metavar="N",
                   help=f"lines of the recorded stream (default {FULL['stream_lines']})")
    p.add_argument("--stream-markers", type=_positive, metavar="N",
                   help=f"markers in the recorded stream (default {FULL['stream_markers']})")
    p.add_argument("--memory-lines", type=_pair, metavar="SHORT,LONG",
                   help="stream lengths compared for the pipeline's memory (default "
                        f"{FULL['memory_lines'][0]},{FULL['memory_lines'][1]})")
    p.add_argument("--repeat", type=_positive, metavar="N",
                   help=f"timed runs per read and start figure; the median counts (default {FULL['repeat']})")
    p.add_argument("--ingest-repeat", type=_positive, metavar="N",
                   help=f"timed runs of each ingest speed and scaling figure (default {FULL['ingest_repeat']})")
    p.add_argument("--workdir", type=Path, metavar="DIR",
                   help="where the throwaway databases go (default: a temporary directory, removed after)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown as well")
    p.add_argument("--strict", action="store_true", help="exit 1 if any figure misses its target")
    return p


def options(argv: list[str] | None = None) -> argparse.Namespace:
    args = parser().parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    parts = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        parser().error(f"--only takes {', '.join(PARTS)}; not {', '.join(unknown) or 'nothing'}")
    args.parts = parts
    if args.memory_lines[1] > args.stream_lines:
        parser().error("--memory-lines LONG may not exceed --stream-lines")
    return args


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(args: argparse.Namespace, workdir: Path) -> list[Figure]:
    figures: list[Figure] = []
    large_app = None
    if "reads" in args.parts or "start" in args.parts:
        began = time.monotonic()
        large_memories = args.memories[1] if "reads" in args.parts else args.start_memories[1]
        large_events = args.events[1] if "reads" in args.parts else 0
        _say(f"building {large_memories:,} memories and {large_events:,} events …")
        large_app = make_app(workdir / "large")
        fill(large_app, memories=large_memories, events=large_events)
        _say(f"  done in {time.monotonic() - began:.1f} s")
    if "reads" in args.parts:
        small_app = make_app(workdir / "small")
        fill(small_app, memories=args.memories[0], events=args.events[0])
        sizes = {"memories": args.memories, "events": args.events}
        assert counts(small_app) == (args.memories[0], args.events[0])
        assert counts(large_app) == (args.memories[1], args.events[1])
        _say("timing the read paths …")
        figures += reads.measure(small_app, large_app, sizes, args.repeat)
    if "start" in args.parts:
        start_large = large_app
        if counts(large_app)[0] != args.start_memories[1]:
            start_large = make_app(workdir / "start-large")
            fill(start_large, memories=args.start_memories[1])
        start_small = make_app(workdir / "start-small")
        fill(start_small, memories=args.start_memories[0])
        _say("timing session starts …")
        figures += startup.measure(start_small, start_large, args.start_memories, args.repeat)
        if not startup.decayed_something(start_large):
            raise RuntimeError("no session start decayed a memory: the figure would measure nothing")
    if "ingest" in args.parts:
        _say(f"recording a stream of {args.stream_lines:,} lines with {args.stream_markers:,} markers …")
        recording = recorded_stream.write(workdir / "stream.ndjson", args.stream_lines, args.stream_markers)
        _say("timing ingest …")
        figures.append(ingest.measure_speed(recording, args.ingest_repeat, workdir))
        # Where the time goes: the same stream with event markers only, and with none.
        for name, mix, markers in (("…, event markers only", (1.0, 0.0, 0.0), args.stream_markers),
                                   ("…, no markers", (1.0, 0.0, 0.0), 0)):
            variant = recorded_stream.write(workdir / "variant.ndjson", args.stream_lines, markers, mix=mix)
            figures.append(ingest.measure_speed(variant, args.ingest_repeat, workdir, name=f"Ingest speed {name}"))
        _say("timing ingest into a small and a large database …")
        figures.append(ingest.measure_scaling(recording, args.memories, args.ingest_repeat, workdir))
        _say("measuring the pipeline's memory …")
        figures.append(ingest.measure_memory(recording, args.memory_lines, workdir))
    return figures


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    began = time.monotonic()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        figures = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="claudeops-bench-") as tmp:
            figures = run(args, Path(tmp))
    print(table(figures))
    if args.markdown:
        print()
        print(markdown(figures))
    missed = [f.name for f in figures if not f.passed]
    _say(f"{len(figures)} figures in {time.monotonic() - began:.0f} s; "
         + (f"missed: {', '.join(missed)}" if missed else "every target met"))
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
