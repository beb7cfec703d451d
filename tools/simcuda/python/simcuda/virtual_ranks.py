"""One rank of a distributed job whose other ranks do not run (SIMCUDA_GPU nccl_peers:virtual, the dry
run's --world-size): torch.distributed's rendezvous gets a store that needs no peers.

Rationale: a rank's memory depends on the world size (its shards, its buckets, NCCL's buffers), not on
the other ranks' values, so a dry run of a 256-rank job needs only the ranks whose memory can differ.
The simulated NCCL completes every communicator and collective with this rank alone (src/nccl/README.md,
Note [virtual peers]); what is left is the rendezvous, where torch.distributed's TCPStore would wait for
every rank to connect and a rank would read keys its peers write.

Approach: when torch.distributed.rendezvous is imported, its store factory (_create_c10d_store, used by
the env:// and tcp:// init methods, torchrun's included) is replaced by a store of this process alone.
It keeps what this rank writes. A wait for keys nobody here wrote returns at once: the absent ranks are
taken to have written them (torch's store-based barrier). A read of a key nobody here wrote answers only
the one kind of key a rank must read from another to go on, a communicator's NCCL unique id (which
torch's ProcessGroupNCCL keeps under a counter), with zeros: with
virtual peers the id names nothing. Any other such read is an error naming the key, not a guess.
Groups (new_group, split_group, a device mesh's dimensions) are made with their own unique ids even
where torch would split the default group's communicator (init_process_group with device_id): a split
cannot know the absent ranks' colors, so not its size, and the simulator models no memory a split
shares. split_group(parent, split_ranks) becomes a new_group per list of ranks, this rank's returned.

Limitations: a job that makes its own store (torch.distributed.TCPStore(...) passed to
init_process_group) or exchanges values through the store waits or fails there.
"""

import sys
from datetime import timedelta

NCCL_UNIQUE_ID_BYTES = 128


def _is_nccl_id_key(key):
    """Where torch's ProcessGroupNCCL keeps a communicator's unique id: under the group's "cuda" prefix,
    a counter, "N" (before torch 2.15) or "nccl_storekey_N", and "nccl_storekey_N_R" for the id of root
    R of a scalable init (one id per so many ranks, each written by its own root). A gloo group's
    peers' addresses sit under its "cpu" prefix: not ids."""
    if "cuda" not in key.split("/"):
        return False
    last = key.rsplit("/", 1)[-1]
    if last.startswith("nccl_storekey_"):
        last = last[len("nccl_storekey_"):].replace("_", "")
    return last.isdigit()


def make_store():
    import torch.distributed as dist

    class virtual_store(dist.Store):
        """The rendezvous store of a rank whose peers are absent."""

        def __init__(self):
            super().__init__()
            self._values = {}
            self._timeout = timedelta(minutes=30)

        def set(self, key, value):
            self._values[key] = value if isinstance(value, bytes) else str(value).encode()

        def get(self, key):
            if key in self._values:
                return self._values[key]
            if _is_nccl_id_key(key):
                return bytes(NCCL_UNIQUE_ID_BYTES)
            what = "a gloo (CPU) group connects to its peers through the store" if "cpu" in key.split("/") else \
                "a job that exchanges values through the store"
            raise RuntimeError(
                "simcuda (virtual ranks): this rank reads store key %r, which only an absent rank writes; %s, which "
                "cannot run with virtual peers" % (key, what))

        def add(self, key, amount):
            now = int(self._values.get(key, b"0")) + int(amount)
            self._values[key] = str(now).encode()
            return now

        def compare_set(self, key, expected, desired):
            current = self._values.get(key)
            expected = expected if isinstance(expected, bytes) else str(expected).encode()
            if (current is None and expected == b"") or current == expected:
                self._values[key] = desired if isinstance(desired, bytes) else str(desired).encode()
                return self._values[key]
            return current if current is not None else expected

        def append(self, key, value):
            self._values[key] = self._values.get(key, b"") + (value if isinstance(value, bytes) else value.encode())

        def check(self, keys):
            return True  # the absent ranks' keys are taken to be there

        def wait(self, keys, timeout=None):
            return None  # as check()

        # c10d calls these three by their C++ names (its trampoline's pure virtuals).
        def deleteKey(self, key):  # noqa: N802
            return self._values.pop(key, None) is not None

        def getNumKeys(self):  # noqa: N802
            return len(self._values)

        def clone(self):
            return self  # another client of the same store: this process's

        def set_timeout(self, timeout):
            self._timeout = timeout

        @property
        def timeout(self):
            return self._timeout

    store = virtual_store()
    _stores.append(store)  # c10d holds the C++ half only: the Python half (its methods) must outlive it
    return store


_stores = []


def _create_store(hostname, port, rank, world_size, timeout, use_libuv=True):
    return make_store()


def install(rendezvous):
    """Replaces the store factory of torch.distributed.rendezvous (the module, just imported)."""
    rendezvous._create_c10d_store = _create_store


def _split_group_without_split(c10d):
    def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None):
        """split_group made of new_group calls, one per list of ranks (global ranks of the default group,
        as torch's split_group takes them); this rank's group, or NON_GROUP_MEMBER."""
        if parent_pg is not None and parent_pg is not c10d._get_default_group():
            raise RuntimeError("simcuda (virtual ranks): split_group of a group other than the default one is not "
                               "emulated with virtual peers")
        me = c10d.get_rank()
        mine = c10d.GroupMember.NON_GROUP_MEMBER
        for ranks in split_ranks or []:
            group = c10d.new_group(ranks, timeout=timeout, pg_options=pg_options, group_desc=group_desc)
            if me in ranks:
                mine = group
        return mine

    return split_group


def _no_split(distributed_c10d):
    """torch.distributed.distributed_c10d, just imported: its groups never split a communicator (the
    modules that take split_group by name, torch.distributed.device_mesh, import it after this)."""
    if hasattr(distributed_c10d, "_get_split_source"):
        distributed_c10d._get_split_source = lambda *args, **kwargs: None
    if hasattr(distributed_c10d, "split_group"):
        distributed_c10d.split_group = _split_group_without_split(distributed_c10d)


def when_imported(hook):
    """Installs the rendezvous store when torch.distributed.rendezvous is imported (`hook` is the
    post-import hook of the start-up code), where this process is a rank with virtual peers."""
    from . import introspect

    if introspect.virtual_peers():
        hook("torch.distributed.rendezvous", install)
        hook("torch.distributed.distributed_c10d", _no_split)
        if not introspect.quiet():
            print("simcuda: virtual peers: this process is one rank; the others do not run", file=sys.stderr)
