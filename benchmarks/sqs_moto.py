"""moto's SQS tests in server mode against zaqar-lite's SQS face (or, to check the count, moto_server).

Runs ``tests/test_sqs/`` of a moto snapshot (a bare git directory or a checkout of
getmoto/moto) in moto's server mode: ``TEST_SERVER_MODE=true`` makes every boto3
client the tests create talk to ``TEST_SERVER_MODE_ENDPOINT``, the server under
judgement, instead of moto's in-process mock. moto itself (the tests import it) is
installed from the snapshot, with its test requirements from PyPI, into a virtualenv
of its own under ``--cache-dir``; the snapshot's source is kept beside it. A file the
snapshot lists but does not hold (a bare snapshot may leave its largest files out) is
taken from moto's newest wheel on PyPI.

Prints how many of all the tests pass, then the most frequent causes of failure.
See sqs_suites.py for the options they share.

Usage::

    python benchmarks/sqs_moto.py /path/to/moto.git [--against localstack|moto] [--code CHECKOUT] \
        [--json run.json] [-k receive]
"""

from __future__ import annotations

import argparse
import time

import sqs_suites as suites

TEST_DIR = "tests/test_sqs"
#: moto's requirements-tests.txt (pytest 9.0.0 turns SkipTest into failures), and a per-test timeout
REQUIREMENTS = ["pytest!=9.0.0", "pytest-order", "pytest-timeout", "freezegun", "pyotp", "pycognito"]


def main(argv: list[str] | None = None) -> None:
    """Copy moto, build the virtualenv, start the server, run, count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    suites.common_arguments(parser, "123456789012")
    args = parser.parse_args(argv)
    snapshot = args.snapshot.resolve()
    commit = suites.snapshot_commit(snapshot)
    source = args.cache_dir / f"moto-src-{commit[:12]}"
    if not (source / suites.READY_MARK).exists():
        suites.log(f"copying the snapshot to {source}")
        missing = suites.extract(snapshot, ["."], source)
        suites.fill_from_wheel("moto", missing, source, source / ".wheel")
        (source / suites.READY_MARK).write_text(commit)
    python = suites.find_python(["3.12", "3.11", "3.13"])
    venv = suites.ensure_venv(
        args.cache_dir, "moto", python, REQUIREMENTS, commit, editable=f"{source}[server]"
    )
    with suites.working_directory(args) as work:
        with suites.judged_server(args, venv, work) as url:
            env = {
                "TEST_SERVER_MODE": "true",
                "TEST_SERVER_MODE_ENDPOINT": url,
                "AWS_ACCESS_KEY_ID": "FOOBARKEY",
                "AWS_SECRET_ACCESS_KEY": "FOOBARSECRET",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
            extra = ["--color=no", *(["-k", args.keyword] if args.keyword else [])]
            started = time.monotonic()
            results, _ = suites.run_pytest(venv, source, [TEST_DIR], env, work, extra, args.timeout)
        run = suites.Run(
            suite="moto tests/test_sqs",
            target=args.against,
            snapshot_commit=commit,
            code_commit=suites.code_commit(args.code.resolve()),
            seconds=time.monotonic() - started,
            results=results,
        )
    every = run.count()
    good, functions = run.functions(list(results))
    suites.finish(
        run,
        args,
        [
            f"all: {every['passed']} passed of {every['total']} tests ({every['failed']} failed,"
            f" {every['error']} errors, {every['skipped']} skipped; {good} of {functions} test functions"
            " pass in every case)"
        ],
    )


if __name__ == "__main__":
    main()
