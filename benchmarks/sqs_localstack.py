"""LocalStack's SQS tests against zaqar-lite's SQS face (or, to check the count, LocalStack or moto).

Runs ``tests/aws/services/sqs/test_sqs.py`` of a LocalStack snapshot (a bare git
directory or a checkout of localstack/localstack) against an endpoint of this machine,
as LocalStack's test suite allows by design: ``TEST_AWS_ENDPOINT_URL`` names the
endpoint, ``TEST_SKIP_LOCALSTACK_START=1`` keeps it from starting LocalStack. The
tests' clients use the suite's default credentials (access key ``test``, secret
``test``, account ``000000000000``, ``us-east-1``). The tests come from the snapshot;
the testing library they load (``localstack-core``, ``localstack-snapshot``) comes from
PyPI into a virtualenv of its own under ``--cache-dir``.

Prints how many of the tests marked ``aws.validated`` (recorded against real AWS)
pass, counted per test case and per test function, and how many of all pass; then
the most frequent causes of failure. See sqs_suites.py for the options they share.

Usage::

    python benchmarks/sqs_localstack.py /path/to/localstack.git [--against localstack|moto] \
        [--code CHECKOUT] [--json run.json] [-k test_send_receive]
"""

from __future__ import annotations

import argparse
import time
import urllib.parse

import sqs_suites as suites

TEST_FILE = "tests/aws/services/sqs/test_sqs.py"
#: the testing library and what its pytest plugins import, beside LocalStack's runtime (its SQS provider
#: serves ``--against localstack``); no CDK, no Java
REQUIREMENTS = [
    *suites.LOCALSTACK_RUNTIME,
    "localstack-snapshot",
    "pytest",
    "pytest-timeout",
    "pytest-httpserver",
    "pytest-rerunfailures",
    "httpx[http2]",
    "json5",
    "websocket-client",
]


def main(argv: list[str] | None = None) -> None:
    """Copy the tests, build the virtualenv, start the server, run, count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    suites.common_arguments(parser, "000000000000")
    args = parser.parse_args(argv)
    snapshot = args.snapshot.resolve()
    commit = suites.snapshot_commit(snapshot)
    python = suites.find_python(["3.13", "3.12", "3.11"])
    venv = suites.ensure_venv(args.cache_dir, "localstack", python, REQUIREMENTS, commit)
    with suites.working_directory(args) as work:
        source = work / "localstack"
        suites.extract(snapshot, ["tests"], source)
        with suites.judged_server(args, venv, work) as url:
            env = {
                "TEST_AWS_ENDPOINT_URL": url,
                "TEST_SKIP_LOCALSTACK_START": "1",
                "AWS_ENDPOINT_URL": url,
                "LOCALSTACK_INTERNAL_TEST_RUN": "1",
                "DISABLE_EVENTS": "1",
                # the endpoint offers SQS only, as LocalStack started with SERVICES=sqs: the fixtures then
                # take the account and region from the test settings instead of asking STS
                "SERVICES": "sqs",
                # the URLs some tests build from LocalStack's host and gateway port name the endpoint
                "LOCALSTACK_HOST": f"localhost.localstack.cloud:{urllib.parse.urlsplit(url).port}",
                "SQS_SUITES_GATEWAY_PORT": str(urllib.parse.urlsplit(url).port),
            }
            extra = ["-k", args.keyword] if args.keyword else []
            started = time.monotonic()
            results, validated = suites.run_pytest(venv, source, [TEST_FILE], env, work, extra, args.timeout)
        run = suites.Run(
            suite="LocalStack test_sqs.py",
            target=args.against,
            snapshot_commit=commit,
            code_commit=suites.code_commit(args.code.resolve()),
            seconds=time.monotonic() - started,
            results=results,
            validated=validated,
        )
    validated_counts = run.count(validated)
    good, functions = run.functions(validated)
    every = run.count()
    suites.finish(
        run,
        args,
        [
            f"aws.validated: {validated_counts['passed']} passed of {validated_counts['total']} tests"
            f" ({good} of {functions} test functions pass in every case)",
            f"all: {every['passed']} passed of {every['total']} tests ({every['failed']} failed,"
            f" {every['error']} errors, {every['skipped']} skipped)",
        ],
    )


if __name__ == "__main__":
    main()
