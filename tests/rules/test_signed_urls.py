"""The pre-signed URL rule, with literal cases.

Every expected signature below was computed apart from zaqar_lite:
``hmac.new(key, text, hashlib.sha256).hexdigest()`` over the text written beside
it, the line ``zaqar-lite signed URL grant v2`` and the grant as compact JSON with
sorted keys.
"""

from __future__ import annotations

import pytest

from zaqar_lite.errors import Forbidden, ValidationFailed
from zaqar_lite.rules import signed_urls
from zaqar_lite.rules.signed_urls import Grant, SignedRequest

NOW = 4_102_444_800.0  # 2100-01-01T00:00:00Z
KEY = "s3cret"
#: key s3cret, text 'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00",'
#: '"methods":["GET","POST"],"paths":["/v2/queues/q1/messages"],"project":"project-a"}'
MESSAGES_GET_POST = "c1be905d29294f1ed64b28330755983abb002c5556405d2aedc23dbed87fd370"
#: a week, the default [signed_urls] max_lifetime
WEEK = 604800


def signed(**changes: object) -> SignedRequest:
    """A request signed for GET and POST on q1's messages until 2100-01-02, then changed."""
    fields: dict[str, object] = {
        "signature": MESSAGES_GET_POST, "expires": "2100-01-02T00:00:00", "methods": "GET,POST",
        "paths": "/v2/queues/q1/messages", "method": "GET", "path": "/v2/queues/q1/messages", "at": NOW,
    }
    fields.update(changes)
    return SignedRequest(**fields)  # type: ignore[arg-type]


# -- the canonical text and the signature -------------------------------------------


def test_the_canonical_text_is_a_version_line_and_compact_sorted_json():
    grant = Grant(paths=("/v2/queues/q1/claims", "/v2/queues/q1/messages"), methods=("GET", "POST"),
                  project="project-a", expires="2100-01-02T00:00:00")
    assert signed_urls.canonical_text(grant) == (
        b'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00","methods":["GET","POST"],'
        b'"paths":["/v2/queues/q1/claims","/v2/queues/q1/messages"],"project":"project-a"}')


def test_the_canonical_text_escapes_what_a_field_holds():
    grant = Grant(paths=("/v2/queues/q1/messages",), methods=("GET",), project='J\\n"é',
                  expires="2100-01-02T00:00:00")
    assert signed_urls.canonical_text(grant) == (
        b'zaqar-lite signed URL grant v2\n{"expires":"2100-01-02T00:00:00","methods":["GET"],'
        b'"paths":["/v2/queues/q1/messages"],"project":"J\\\\n\\"\\u00e9"}')


def test_a_project_holding_a_separator_signs_another_text_than_its_tail_with_more_methods():
    # Zaqar's text of both grants is '/v2/queues/q1/messages\\nGET\\nJ\\nvictim\\n2100-01-02T00:00:00'
    minted = Grant(("/v2/queues/q1/messages",), ("GET",), "J\\nvictim", "2100-01-02T00:00:00")
    forged = Grant(("/v2/queues/q1/messages",), ("GET", "\\nJ"), "victim", "2100-01-02T00:00:00")
    assert signed_urls.canonical_text(minted) != signed_urls.canonical_text(forged)
    assert signed_urls.sign(KEY, minted) != signed_urls.sign(KEY, forged)


@pytest.mark.parametrize(("key", "grant", "expected"), [
    ("test", Grant(("/v2/queues/shared/messages",), ("POST",), "my-project", "2100-01-02T00:00:00"),
     "b1cf37bc3ea69a8f33a3dc88786fa7085465e39dcd78b9737995f7399d0a1ccc"),
    ("s3cret", Grant(("/v2/queues/q1/claims", "/v2/queues/q1/messages"), ("GET", "POST"), "project-a",
                     "2100-01-02T00:00:00"),
     "e0d138916b33ab07598868ce2ad83e6e592b6bd5c7d1d6bee86912e708190dbf"),
    ("s3cret", Grant(("/v2/queues/q1/messages",), ("GET",), "project-a", "2100-05-31T17:00:17"),
     "5441c4b49435d148ea2a143eaf0a0efc63985963159a6d4b5afe9191cb84433e"),
], ids=["one-path-one-method", "two-paths-two-methods", "odd-time"])
def test_a_grant_is_signed_with_hmac_sha256_in_hex(key, grant, expected):
    assert signed_urls.sign(key, grant) == expected


# -- the grant of a share -------------------------------------------------------------


def test_a_share_without_fields_grants_get_on_messages_for_one_day():
    assert signed_urls.grant_for_share("q1", "project-a", NOW) == Grant(
        paths=("/v2/queues/q1/messages",), methods=("GET",), project="project-a",
        expires="2100-01-02T00:00:00")


def test_empty_lists_mean_the_defaults_as_zaqar():
    grant = signed_urls.grant_for_share("q1", "project-a", NOW, paths=[], methods=[])
    assert (grant.paths, grant.methods) == (("/v2/queues/q1/messages",), ("GET",))


def test_a_share_sorts_full_paths_and_methods_and_drops_repeats():
    grant = signed_urls.grant_for_share("q1", "p", NOW,
                                        paths=["subscriptions", "messages", "claims", "claims"],
                                        methods=["PUT", "DELETE", "GET", "PUT"])
    assert grant.paths == ("/v2/queues/q1/claims", "/v2/queues/q1/messages", "/v2/queues/q1/subscriptions")
    assert grant.methods == ("DELETE", "GET", "PUT")


@pytest.mark.parametrize(("expires", "written"), [
    ("2100-05-31T19:00:17+02", "2100-05-31T17:00:17"),
    ("2100-05-31T19:00:17+02:00", "2100-05-31T17:00:17"),
    ("2100-05-31T12:30:17-0430", "2100-05-31T17:00:17"),
    ("2100-05-31T17:00:17Z", "2100-05-31T17:00:17"),
    ("2100-05-31T17:00:17", "2100-05-31T17:00:17"),
    ("2100-05-31T17:00:17.987654", "2100-05-31T17:00:17"),
], ids=["+02", "+02:00", "-0430", "Z", "no-zone-is-utc", "fraction-dropped"])
def test_expires_is_written_in_utc_to_the_second(expires, written):
    assert signed_urls.grant_for_share("q1", "p", NOW, expires=expires).expires == written


@pytest.mark.parametrize("expires", ["3600", "tomorrow", "2100-01-02", "2100-01-02 00:00:00", "",
                                     "2100-01-02T00:00", "2100-01-02T00:00:00+2"])
def test_expires_that_is_no_iso_8601_date_and_time_is_refused(expires):
    with pytest.raises(ValidationFailed, match=r"^expires must be an ISO 8601 date and time such as "
                                               r"2016-01-01T00:00:00"):
        signed_urls.grant_for_share("q1", "p", NOW, expires=expires)


@pytest.mark.parametrize("expires", ["2100-02-30T00:00:00", "2100-13-01T00:00:00", "2100-01-01T24:00:00",
                                     "0000-01-01T00:00:00", "9999-12-31T23:59:59-05:00",
                                     "2100-01-01T00:00:00+24:00"])
def test_expires_that_names_no_existing_time_is_refused(expires):
    with pytest.raises(ValidationFailed, match=r"^expires names no existing date and time"):
        signed_urls.grant_for_share("q1", "p", NOW, expires=expires)


@pytest.mark.parametrize("expires", ["2100-01-01T00:00:00", "2099-12-31T23:59:59", "2016-09-01T00:00:00"])
def test_expires_now_or_before_is_refused(expires):
    with pytest.raises(ValidationFailed, match=r"^expires must be later than now \(2100-01-01T00:00:00\)"):
        signed_urls.grant_for_share("q1", "p", NOW, expires=expires)


def test_a_path_outside_zaqars_set_is_refused():
    with pytest.raises(ValidationFailed, match=r"^paths may hold only claims, messages, subscriptions; "
                                               r"stats cannot be shared\.$"):
        signed_urls.grant_for_share("q1", "p", NOW, paths=["messages", "stats"])


def test_a_method_outside_the_set_is_refused():
    with pytest.raises(ValidationFailed, match=r"^methods may hold only DELETE, GET, HEAD, OPTIONS, PATCH, "
                                               r"POST, PUT \(in capitals\); get is not one of them\.$"):
        signed_urls.grant_for_share("q1", "p", NOW, methods=["get"])


# -- a signed request -------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/v2/queues/q1/messages"),
    ("POST", "/v2/queues/q1/messages"),
    ("GET", "/v2/queues/q1/messages/5f0c2a"),
], ids=["list", "post", "one-message-under-the-path"])
def test_a_signed_request_within_its_grant_passes(method, path):
    signed_urls.authorise(KEY, signed(method=method, path=path), "project-a")


def test_headers_in_another_order_or_with_blanks_name_the_same_grant():
    signed_urls.authorise(KEY, signed(methods=" POST , GET", expires="2100-01-02T00:00:00Z"), "project-a")


@pytest.mark.parametrize("changes", [
    {"methods": "GET,POST,DELETE"},
    {"paths": "/v2/queues/q1/messages,/v2/queues/q1/claims"},
    {"paths": "/v2/queues/q2/messages", "path": "/v2/queues/q2/messages"},
    {"expires": "2100-01-03T00:00:00"},
    {"signature": MESSAGES_GET_POST[:-1] + "6"},
    {"signature": MESSAGES_GET_POST.upper()},
    {"signature": "é" * 64},
], ids=["method-added", "path-added", "queue-changed", "expiry-extended", "one-digit", "upper-case",
        "not-ascii"])
def test_a_tampered_request_is_forbidden(changes):
    with pytest.raises(Forbidden, match=r"^The URL-Signature does not match the URL-Paths, URL-Methods, "
                                        r"URL-Expires and X-Project-ID of the request"):
        signed_urls.authorise(KEY, signed(**changes), "project-a")


def test_a_signature_of_another_project_is_forbidden():
    with pytest.raises(Forbidden, match=r"^The URL-Signature does not match"):
        signed_urls.authorise(KEY, signed(), "project-b")


def test_a_signature_under_another_key_is_forbidden():
    with pytest.raises(Forbidden, match=r"^The URL-Signature does not match"):
        signed_urls.authorise("another-key", signed(), "project-a")


@pytest.mark.parametrize("at", [NOW + 86400, NOW + 86400.5, NOW + 10 * 86400],
                         ids=["at", "just-after", "later"])
def test_an_expired_signed_request_is_forbidden(at):
    with pytest.raises(Forbidden, match=r"^The signed URL expired at 2100-01-02T00:00:00Z\.$"):
        signed_urls.authorise(KEY, signed(at=at), "project-a")


def test_a_request_one_second_before_expiry_passes():
    signed_urls.authorise(KEY, signed(at=NOW + 86399), "project-a")


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "HEAD"])
def test_a_method_the_grant_does_not_list_is_forbidden(method):
    with pytest.raises(Forbidden, match=rf"^The signed URL allows GET, POST; it does not allow {method}\.$"):
        signed_urls.authorise(KEY, signed(method=method), "project-a")


@pytest.mark.parametrize("path", ["/v2/queues/q1/claims", "/v2/queues/q1/messagesx", "/v2/queues/q1",
                                  "/v2/queues/q2/messages", "/v2/queues/q1/share", "//v2/queues/q1/messages"])
def test_a_path_the_grant_does_not_cover_is_forbidden(path):
    with pytest.raises(Forbidden, match=r"^The signed URL covers /v2/queues/q1/messages and what lies under "
                                        rf"them; it does not cover {path}\.$"):
        signed_urls.authorise(KEY, signed(path=path), "project-a")


@pytest.mark.parametrize(("header", "changes"), [
    ("URL-Signature", {"signature": ""}),
    ("URL-Expires", {"expires": None}),
    ("URL-Methods", {"methods": " "}),
    ("URL-Paths", {"paths": None}),
])
def test_a_missing_or_empty_header_is_forbidden_naming_it(header, changes):
    with pytest.raises(Forbidden, match=rf"; {header} is missing or empty\.$"):
        signed_urls.authorise(KEY, signed(**changes), "project-a")


def test_an_expiry_header_that_is_no_time_is_forbidden():
    with pytest.raises(Forbidden, match=r"^URL-Expires must be an ISO 8601 date and time"):
        signed_urls.authorise(KEY, signed(expires="not a real date"), "project-a")


def test_without_a_key_every_signed_request_is_forbidden_saying_why():
    with pytest.raises(Forbidden, match=r"^Signed URLs are not enabled on this server: its operator has not "
                                        r"set \[signed_urls\] secret_key\.$"):
        signed_urls.authorise("", signed(), "project-a")


# -- what a grant may name, and for how long ----------------------------------------------


def test_a_signature_minted_for_a_project_holding_a_separator_does_not_open_its_tail():
    minted = signed_urls.sign(KEY, Grant(("/v2/queues/q1/messages",), ("GET",), "J\\nvictim",
                                         "2100-01-02T00:00:00"))
    with pytest.raises(Forbidden):
        signed_urls.authorise(KEY, signed(signature=minted, methods="GET\\nJ"), "victim")


@pytest.mark.parametrize("methods", ["GET\\nJ", "GET,get", "GET,FETCH", "GET,PO ST"],
                         ids=["backslash-n", "lower-case", "unknown", "blank-inside"])
def test_a_grant_naming_a_method_no_url_is_signed_for_is_forbidden_even_when_signed(methods):
    grant = Grant(("/v2/queues/q1/messages",), tuple(sorted(m.strip() for m in methods.split(","))),
                  "project-a", "2100-01-02T00:00:00")
    request = signed(signature=signed_urls.sign(KEY, grant), methods=methods)
    with pytest.raises(Forbidden, match=r"^URL-Methods may hold only DELETE, GET, HEAD, OPTIONS, PATCH, "
                                        r"POST, PUT; '.*' is not one of them\.$"):
        signed_urls.authorise(KEY, request, "project-a")


@pytest.mark.parametrize("paths", ["/v2/queues/q1/messages\\nGET", "/v2/queues/q1/stats", "/v2/health",
                                   "/v2/queues/q1", "/v2/queues/../messages", "/v2/queues/q 1/messages",
                                   "/v2/queues/q1/messages/"],
                         ids=["backslash-n", "stats", "health", "queue", "dot-dot", "blank", "slash"])
def test_a_grant_naming_a_path_no_url_is_signed_for_is_forbidden_even_when_signed(paths):
    grant = Grant((paths,), ("GET",), "project-a", "2100-01-02T00:00:00")
    request = signed(signature=signed_urls.sign(KEY, grant), methods="GET", paths=paths, path=paths)
    with pytest.raises(Forbidden, match=r"^URL-Paths may hold only paths /v2/queues/QUEUE/RESOURCE with "
                                        r"RESOURCE one of claims, messages, subscriptions; "):
        signed_urls.authorise(KEY, request, "project-a")


def test_a_share_may_expire_at_most_max_lifetime_from_now():
    grant = signed_urls.grant_for_share("q1", "p", NOW, expires="2100-01-08T00:00:00", max_lifetime=WEEK)
    assert grant.expires == "2100-01-08T00:00:00"
    with pytest.raises(ValidationFailed, match=r"^expires may be at most 604800 seconds from now "
                                               r"\(2100-01-08T00:00:00\), the longest a signed URL is valid "
                                               r"on this server \(\[signed_urls\] max_lifetime\)\.$"):
        signed_urls.grant_for_share("q1", "p", NOW, expires="2100-01-08T00:00:01", max_lifetime=WEEK)


def test_a_share_until_9999_is_refused():
    with pytest.raises(ValidationFailed, match=r"^expires may be at most 604800 seconds from now"):
        signed_urls.grant_for_share("q1", "p", NOW, expires="9999-12-31T23:59:59", max_lifetime=WEEK)


def test_a_share_without_expires_lasts_max_lifetime_when_shorter_than_a_day():
    grant = signed_urls.grant_for_share("q1", "p", NOW, max_lifetime=3600)
    assert grant.expires == "2100-01-01T01:00:00"


def test_a_signed_request_valid_longer_than_max_lifetime_from_now_is_forbidden():
    with pytest.raises(Forbidden, match=r"^The signed URL is valid until 2100-01-02T00:00:00Z, more than "
                                        r"the 3600 seconds this server allows \(\[signed_urls\] "
                                        r"max_lifetime\)\.$"):
        signed_urls.authorise(KEY, signed(), "project-a", 3600)
    signed_urls.authorise(KEY, signed(at=NOW + 86400 - 3600), "project-a", 3600)
