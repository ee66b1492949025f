"""The pre-signed URL rule, with literal cases.

Every expected signature below was computed apart from zaqar_lite, as Zaqar's
``zaqar/common/urls.py`` does it: ``hmac.new(key, text, hashlib.sha256).hexdigest()``
over the text written here, whose separators are the two characters ``\\n``.
"""

from __future__ import annotations

import pytest

from zaqar_lite.claims import signed_urls
from zaqar_lite.claims.signed_urls import Grant, SignedRequest
from zaqar_lite.errors import Forbidden, ValidationFailed

NOW = 4_102_444_800.0  # 2100-01-01T00:00:00Z
KEY = "s3cret"
#: key s3cret, text '/v2/queues/q1/messages\nGET,POST\nproject-a\n2100-01-02T00:00:00'
MESSAGES_GET_POST = "7c5f3fa1e820bc7f21a3954cb47dd1a577f26ca29543200b7a2a255662fc4845"


def signed(**changes: object) -> SignedRequest:
    """A request signed for GET and POST on q1's messages until 2100-01-02, then changed."""
    fields: dict[str, object] = {
        "signature": MESSAGES_GET_POST, "expires": "2100-01-02T00:00:00", "methods": "GET,POST",
        "paths": "/v2/queues/q1/messages", "method": "GET", "path": "/v2/queues/q1/messages", "at": NOW,
    }
    fields.update(changes)
    return SignedRequest(**fields)  # type: ignore[arg-type]


# -- the canonical text and the signature -------------------------------------------


def test_the_canonical_text_separates_fields_with_a_backslash_and_n_as_zaqar():
    grant = Grant(paths=("/v2/queues/q1/claims", "/v2/queues/q1/messages"), methods=("GET", "POST"),
                  project="project-a", expires="2100-01-02T00:00:00")
    assert signed_urls.canonical_text(grant) == (
        b"/v2/queues/q1/claims,/v2/queues/q1/messages\\nGET,POST\\nproject-a\\n2100-01-02T00:00:00")


@pytest.mark.parametrize(("key", "grant", "expected"), [
    ("test", Grant(("/v2/queues/shared/messages",), ("POST",), "my-project", "2100-01-02T00:00:00"),
     "16a3f04f17b661913c2748f453cedad9a938c1cf9a60add302ac20a243b7ef58"),
    ("s3cret", Grant(("/v2/queues/q1/claims", "/v2/queues/q1/messages"), ("GET", "POST"), "project-a",
                     "2100-01-02T00:00:00"),
     "ddc99b4669e3e0bed16445a9fb0b59b0e5ed0cd047e91003c5e2ba66909ddea5"),
    ("s3cret", Grant(("/v2/queues/q1/messages",), ("GET",), "project-a", "2100-05-31T17:00:17"),
     "febab9c8d4338f2720e34371ea24ea48651818adf8cd03f957b0f3f3dd1f072e"),
], ids=["zaqar-test-case", "two-paths-two-methods", "odd-time"])
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
