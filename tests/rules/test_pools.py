"""The pool rules: names, where a new queue goes, the same-pool rule, fan-out targets, capabilities."""

from __future__ import annotations

import pytest

from zaqar_lite.errors import ValidationFailed
from zaqar_lite.models import Pool
from zaqar_lite.rules import pools

EAST = Pool("east", "redis://127.0.0.1:6379/0", 30)
WEST = Pool("west", "sqlite:///west.db", 10)
DARK = Pool("dark", "sqlite:///dark.db", 0)
COLD = Pool("cold", "swift://u:k@127.0.0.1:8080/auth/v1.0", 5, flavor="archive")


@pytest.mark.parametrize(("draw", "chosen"),
                         [(0.0, "east"), (0.7499, "east"), (0.75, "west"), (0.9999, "west")])
def test_a_draw_lands_on_a_pool_by_its_share_of_the_weights(draw, chosen):
    found = pools.weighted([EAST, DARK, WEST], draw)
    assert found is not None and found.name == chosen


def test_no_pool_with_weight_places_nothing():
    assert pools.weighted([DARK], 0.5) is None
    assert pools.weighted([], 0.5) is None


def test_a_queue_of_no_flavor_stays_in_the_default_store_while_no_pool_of_no_flavor_has_weight():
    assert pools.place("q", None, [DARK, COLD], None, 0.5) is None
    assert pools.place("q", None, [], None, 0.5) is None


def test_a_queue_of_no_flavor_goes_to_the_pools_of_no_flavor():
    assert pools.place("q", None, [COLD, EAST], None, 0.99) == EAST
    assert pools.place("q", "archive", [COLD, EAST], None, 0.0) == COLD


def test_a_queue_goes_beside_its_dead_letter_queue_whatever_the_weights():
    assert pools.place("q", None, [EAST, DARK], DARK, 0.0) == DARK
    assert pools.place("q", None, [EAST, COLD], COLD, 0.0) == COLD


def test_a_flavor_without_weight_or_a_linked_pool_of_another_flavor_is_refused():
    with pytest.raises(ValidationFailed) as raised:
        pools.place("q", "archive", [EAST, DARK], None, 0.1)
    assert str(raised.value) == "Queue q cannot be placed: flavor archive has no pool with a weight above 0."
    with pytest.raises(ValidationFailed) as raised:
        pools.place("q", "archive", [EAST, COLD], EAST, 0.1)
    assert str(raised.value).startswith(
        "Queue q requests flavor archive, but its dead-letter queue is in pool east")


def test_linked_queues_of_two_pools_are_refused_naming_both():
    pools.check_same_pool("orders", "east", "dlq", "east", "dead-letter queue")
    with pytest.raises(ValidationFailed) as raised:
        pools.check_same_pool("orders", "east", "dlq", "west", "dead-letter queue")
    assert str(raised.value).startswith(
        "The dead-letter queue dlq is in pool west, but queue orders is in pool east")


@pytest.mark.parametrize(("subscriber", "queue"), [
    ("trust+http://127.0.0.1:8888/v2/queues/copies/messages", "copies"),
    ("trust+https://mq.example.com/v2/queues/a-b.c/messages/", "a-b.c"),
    ("http://127.0.0.1:8888/v2/queues/copies/messages", None),
    ("trust+http://127.0.0.1:8888/v2/queues/copies/claims", None),
    ("mailto:ops@example.com", None),
])
def test_a_fan_out_subscriber_names_the_queue_it_posts_to(subscriber, queue):
    assert pools.fan_out_queue(subscriber) == queue


@pytest.mark.parametrize("name", ["", "a.b", "x" * 65, "a b", "storage", "catalog_reachable"])
def test_bad_pool_names_are_refused(name):
    with pytest.raises(ValidationFailed):
        pools.check_name("pool", name)


def test_a_flavor_can_what_all_its_pools_can():
    assert pools.capabilities([EAST]) == ["AOD", "CLAIMS", "FIFO", "HIGH_THROUGHPUT"]
    assert pools.capabilities([EAST, WEST]) == ["AOD", "CLAIMS", "FIFO"]
    assert pools.capabilities([WEST, COLD]) == ["AOD", "CLAIMS", "DURABILITY"]
    assert pools.capabilities([]) == []


def test_the_flavor_a_queue_requests_is_a_flavor_name():
    assert pools.requested_flavor({"_flavor": "archive"}) == "archive"
    assert pools.requested_flavor({"_flavor": None}) is None
    assert pools.requested_flavor(None) is None
    with pytest.raises(ValidationFailed):
        pools.requested_flavor({"_flavor": "no way"})


# -- the stores a pool may name ---------------------------------------------------------

ALLOWED = ("10.0.0.5:6379", "mongo.internal:27017", "swift.internal:8080", "[::1]:6380")


def checked(uri, sqlite_dir="/var/lib/zaqar-lite/pools", default="sqlite:///zaqar.db"):
    return pools.check_pool_uri(uri, sqlite_dir=sqlite_dir, allowed_hosts=ALLOWED, default_uri=default,
                                cwd="/var/lib/zaqar-lite")


@pytest.mark.parametrize(("uri", "identity"), [
    ("sqlite:////var/lib/zaqar-lite/pools/east.db", ("sqlite", "/var/lib/zaqar-lite/pools/east.db")),
    ("sqlite:////var/lib/zaqar-lite/pools/deep/east.db?synchronous=normal",
     ("sqlite", "/var/lib/zaqar-lite/pools/deep/east.db")),
    ("redis://10.0.0.5:6379/2", ("redis", "10.0.0.5:6379", "2")),
    ("redis://:pw@10.0.0.5/0?wait_timeout=2", ("redis", "10.0.0.5:6379", "0")),
    ("redis://[::1]:6380/0", ("redis", "::1:6380", "0")),
    ("redis+cluster://10.0.0.5:6379,10.0.0.5:6379/", ("redis", "10.0.0.5:6379,10.0.0.5:6379", "0")),
    ("mongodb://u:p@MONGO.internal/queues?replicaSet=rs0", ("mongodb", "mongo.internal:27017", "queues")),
    ("swift://acct%3Auser:key@swift.internal:8080/auth/v1.0?prefix=east",
     ("swift", "swift.internal:8080", "acct:user", "east")),
])
def test_a_pool_uri_on_the_allow_list_is_accepted_as_the_store_it_names(uri, identity):
    assert checked(uri) == identity


@pytest.mark.parametrize(("uri", "description"), [
    ("sqlite:////etc/cron.d/evil", "uri: a SQLite pool is a file under [pools] sqlite_dir."),
    ("sqlite:////var/lib/zaqar-lite/pools-evil/x.db",
     "uri: a SQLite pool is a file under [pools] sqlite_dir."),
    ("sqlite:////var/lib/zaqar-lite/pools", "uri: a SQLite pool is a file under [pools] sqlite_dir."),
    ("sqlite:////var/lib/zaqar-lite/pools/../zaqar2.db",
     "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
    ("sqlite:////var/lib/zaqar-lite/pools//x.db",
     "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
    ("sqlite:////var/lib/zaqar-lite/pools/./x.db",
     "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
    ("sqlite:///pools/x.db",
     "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
    ("sqlite://host/var/lib/zaqar-lite/pools/x.db",
     "uri: a SQLite pool is sqlite:////ABSOLUTE/PATH, a normalised path (no ., .. or doubled /)."),
    ("sqlite:///:memory:",
     "uri: a SQLite pool is a file, not :memory: (a database that each connection would see empty)."),
    ("sqlite:////var/lib/zaqar-lite/pools/x.db?mode=ro",
     "uri: a sqlite pool may not set the option(s) mode; it may set: synchronous."),
    ("sqlite:////var/lib/zaqar-lite/pools/x.db#frag", "uri: a pool's URI has no #fragment."),
    ("redis://10.0.0.6:6379/0",
     "uri: 10.0.0.6:6379 is not a store pools may use; the operator lists those in [pools] allowed_hosts."),
    ("redis://10.0.0.5:22/0",
     "uri: 10.0.0.5:22 is not a store pools may use; the operator lists those in [pools] allowed_hosts."),
    ("redis://:pw@169.254.169.254/0",
     "uri: 169.254.169.254:6379 is not a store pools may use; the operator lists those in "
     "[pools] allowed_hosts."),
    ("redis+cluster://10.0.0.5:6379,10.0.0.7:6379/",
     "uri: 10.0.0.7:6379 is not a store pools may use; the operator lists those in [pools] allowed_hosts."),
    ("mongodb://mongo.internal,evil.example/q",
     "uri: evil.example:27017 is not a store pools may use; the operator lists those in "
     "[pools] allowed_hosts."),
    ("swift://a%3Au:k@swift.internal/auth/v1.0?https=true",
     "uri: swift.internal:443 is not a store pools may use; the operator lists those in "
     "[pools] allowed_hosts."),
    ("redis://10.0.0.5:6379/0?ssl_ca_certs=/etc/shadow",
     "uri: a redis pool may not set the option(s) ssl_ca_certs; it may set: health_check_interval, "
     "socket_connect_timeout, socket_timeout, wait_replicas, wait_timeout."),
    ("mongodb://mongo.internal/q?proxyHost=evil.example", "uri: a mongodb pool may not set the option(s) "
     "proxyHost; it may set: appname, authmechanism, authsource, connecttimeoutms, directconnection, "
     "journal, maxpoolsize, minpoolsize, readpreference, replicaset, retryreads, retrywrites, "
     "serverselectiontimeoutms, sockettimeoutms, ssl, tls, w, wtimeoutms."),
    ("mongodb+srv://mongo.internal/q",
     "uri: a pool is a sqlite://, redis://, rediss://, redis+cluster://, mongodb:// or swift:// URI."),
    ("http://10.0.0.5:6379/",
     "uri: a pool is a sqlite://, redis://, rediss://, redis+cluster://, mongodb:// or swift:// URI."),
    ("redis://10.0.0.5:port/0", "uri: each server of a pool's URI is HOST or HOST:PORT."),
])
def test_a_pool_uri_off_the_allow_list_is_refused_saying_why(uri, description):
    with pytest.raises(ValidationFailed) as refused:
        checked(uri)
    assert str(refused.value) == description


def test_no_sqlite_pool_is_allowed_without_a_directory():
    with pytest.raises(ValidationFailed) as refused:
        checked("sqlite:////var/lib/zaqar-lite/pools/x.db", sqlite_dir="")
    assert str(refused.value) == ("uri: SQLite pools are off on this server; the operator allows them under "
                                  "one directory with [pools] sqlite_dir.")


@pytest.mark.parametrize(("uri", "default"), [
    ("sqlite:////var/lib/zaqar-lite/pools/z.db", "sqlite:///pools/z.db"),
    ("sqlite:////var/lib/zaqar-lite/pools/z.db", "sqlite:////var/lib/zaqar-lite/pools/./z.db"),
    ("sqlite:////var/lib/zaqar-lite/pools/z.db?synchronous=full",
     "sqlite:////var/lib/zaqar-lite/pools/z.db?synchronous=normal"),
    ("redis://10.0.0.5/0", "redis://:secret@10.0.0.5:6379"),
    ("redis://10.0.0.5:6379/0?wait_timeout=3", "redis://10.0.0.5:6379/0"),
    ("mongodb://Mongo.Internal:27017/zaqar", "mongodb://mongo.internal"),
])
def test_any_spelling_of_the_default_store_is_refused(uri, default):
    with pytest.raises(ValidationFailed) as refused:
        checked(uri, default=default)
    assert str(refused.value) == ("uri: this is the [storage] uri store, which holds the queues of no pool; "
                                  "a pool needs a store of its own.")


def test_another_database_or_prefix_of_the_default_server_is_a_store_of_its_own():
    assert checked("redis://10.0.0.5/1", default="redis://10.0.0.5/0") == ("redis", "10.0.0.5:6379", "1")
    assert checked("swift://a%3Au:k@swift.internal:8080/auth/v1.0?prefix=b",
                   default="swift://a%3Au:k@swift.internal:8080/auth/v1.0")[3] == "b"


@pytest.mark.parametrize(("uri", "shown"), [
    ("redis://:s3cret@10.0.0.5:6379/0", "redis://:****@10.0.0.5:6379/0"),
    ("redis://app:s3cret@10.0.0.5:6379/0", "redis://app:****@10.0.0.5:6379/0"),
    ("rediss+cluster://app:p%40ss@h1:7000,h2:7001/", "rediss+cluster://app:****@h1:7000,h2:7001/"),
    ("mongodb://u:p@w@h/db?authSource=admin", "mongodb://u:****@h/db?authSource=admin"),
    ("swift://acct%3Auser:key@h:8080/auth/v1.0?prefix=q", "swift://acct%3Auser:****@h:8080/auth/v1.0?prefix=q"),
    ("redis://h:6379/0?password=s3cret&wait_timeout=1", "redis://h:6379/0?password=****&wait_timeout=1"),
    ("swift://u@h/auth?os_auth_token=t&prefix=p", "swift://u@h/auth?os_auth_token=****&prefix=p"),
    ("redis://user@h:6379/0", "redis://user@h:6379/0"),
    ("sqlite:////var/lib/p/east.db?synchronous=normal", "sqlite:////var/lib/p/east.db?synchronous=normal"),
])
def test_a_uri_is_shown_with_its_password_and_secret_options_masked(uri, shown):
    assert pools.masked_uri(uri) == shown
