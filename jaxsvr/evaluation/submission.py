"""The EPIC-KITCHENS-100 multi-instance retrieval challenge file: written and read back.

The challenge takes a pickle (protocol 4) of one dict, as the public JPoSE test script
writes it with `pd.to_pickle` (mwray/Joint-Part-of-Speech-Embeddings,
`src/train/test_jpose_triplet.py --challenge-submission`):

  {"version": 0.1, "challenge": "multi_instance_retrieval",
   "sim_mat": float32 [clips, sentences],
   "vis_ids": pandas.Index of the test clips' narration_ids (the clip table's order),
   "txt_ids": pandas.Index of the test sentences' ids (the sentence table's order),
   "sls_pt": 2, "sls_tl": 3, "sls_td": 3}

The `sls_*` entries are the self-reported supervision levels of the challenge's rules
(pre-training, training labels, training data); 2 / 3 / 3 are the values the JPoSE
script declares for a method trained on frozen features with the EK-100 labels, and the
defaults here (override them for another method).

`write` produces that object without pandas, the same bytes as `pd.to_pickle` of pandas 3
(each id list pickled as `pandas.core.indexes.base._new_Index` of an object-dtype Index
named "narration_id"; pandas 1 and 2 name the class by its module), so `pd.read_pickle`
returns the same dict as for the JPoSE script's file. The file is written whole (a
temporary file renamed into place).

`read` is the other way: pickles run code when loaded, so it needs `allow_pickle=True`,
and even then it unpickles with a whitelist (NumPy arrays and dtypes; pandas' Index, of
objects or, as pandas 3 makes it by default, of Python strings, read by stand-ins as a
plain list of ids, without pandas) so no other code runs. The file must hold the
keys above, `challenge` "multi_instance_retrieval", a finite 2-D `sim_mat` whose shape is
the number of ids, and ids without repeats; anything else is one `InputError` line.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.runtime.workdir import atomic_write

CHALLENGE = "multi_instance_retrieval"
VERSION = 0.1
PROTOCOL = 4  # the JPoSE script's
SUPERVISION = {"sls_pt": 2, "sls_tl": 3, "sls_td": 3}  # the JPoSE script's declaration
SLS_RANGE = range(0, 6)  # the challenge's supervision levels
INDEX_NAME = "narration_id"
KEYS = ("version", "challenge", "sim_mat", "vis_ids", "txt_ids", *SUPERVISION)
# pandas' names in the pickle of an Index: `_new_Index` applied to the class, which pandas
# 3 writes as pandas.Index (pandas 1 and 2, the JPoSE script's: pandas.core.indexes.base)
_PANDAS_INDEX = ("pandas", "Index")
_PANDAS_INDEX_BEFORE_3 = ("pandas.core.indexes.base", "Index")
_PANDAS_NEW_INDEX = ("pandas.core.indexes.base", "_new_Index")


@dataclasses.dataclass(frozen=True)
class Submission:
    """A challenge file's contents: `sim` [clips, sentences] float32, the ids of its rows
    and columns, and the supervision levels."""

    sim: np.ndarray
    vis_ids: list[str]
    txt_ids: list[str]
    supervision: dict[str, int] = dataclasses.field(default_factory=lambda: dict(SUPERVISION))


def write(path, submission: Submission) -> None:
    """Writes `submission` as the challenge pickle at `path` (module docstring)."""
    check(submission, str(path))
    obj = {
        "version": VERSION,
        "challenge": CHALLENGE,
        "sim_mat": np.ascontiguousarray(submission.sim, dtype=np.float32),
        "vis_ids": _Index(submission.vis_ids),
        "txt_ids": _Index(submission.txt_ids),
        **{k: int(submission.supervision[k]) for k in SUPERVISION},
    }
    buffer = io.BytesIO()
    _PandasFreePickler(buffer, protocol=PROTOCOL).dump(obj)
    atomic_write(path, lambda f: f.write(buffer.getbuffer()))


def read(path, *, allow_pickle: bool = False, flag: str = "--submission") -> Submission:
    """The challenge file at `path`, checked (module docstring).

    Args:
      allow_pickle: the user's consent to unpickle the file (`flag`'s `--allow-pickle`).
      flag: the flag that named the file, for messages.

    Raises:
      InputError: without `allow_pickle`, or a file that is not a whole challenge file.
    """
    path = locations.locate(path)
    if not allow_pickle:
        raise InputError(
            f"{flag} {path}: a challenge file is a pickle, and loading a pickle runs code; "
            "pass --allow-pickle if you trust the file"
        )
    if not path.is_file():
        raise InputError(f"{flag} {path} not found")
    try:
        obj = _Unpickler(io.BytesIO(path.read_bytes())).load()
    except InputError:
        raise
    except Exception as e:  # truncated, not a pickle, ...: pickle raises many kinds
        raise InputError(
            f"{flag} {path} is not a readable pickle ({type(e).__name__}: {e}): write it with "
            "python -m jaxsvr.submit or the challenge's scripts"
        ) from None
    where = f"{flag} {path}"
    if not isinstance(obj, dict):
        raise InputError(f"{where} holds a {type(obj).__name__}, not the challenge's dict")
    missing = [k for k in KEYS if k not in obj]
    if missing:
        raise InputError(f"{where} has no {missing[0]!r} (a challenge file holds {KEYS})")
    if obj["challenge"] != CHALLENGE:
        raise InputError(f"{where} is for the challenge {obj['challenge']!r}, not {CHALLENGE!r}")
    sim = obj["sim_mat"]
    if not isinstance(sim, np.ndarray) or sim.dtype.kind not in "fiu":
        raise InputError(f"{where}: sim_mat is not a numeric array")
    submission = Submission(
        sim=sim.astype(np.float32, copy=False),
        vis_ids=_ids(obj["vis_ids"], "vis_ids", where),
        txt_ids=_ids(obj["txt_ids"], "txt_ids", where),
        supervision={k: obj[k] for k in SUPERVISION},
    )
    check(submission, where)
    return submission


def check(submission: Submission, where: str) -> None:
    """Raises InputError unless `submission` is a valid challenge entry (module docstring)."""
    sim = submission.sim
    if sim.ndim != 2:
        raise InputError(f"{where}: sim_mat is {sim.ndim}-D {list(sim.shape)}, not 2-D")
    for name, ids, size in (
        ("vis_ids", submission.vis_ids, sim.shape[0]),
        ("txt_ids", submission.txt_ids, sim.shape[1]),
    ):
        if len(ids) != size:
            axis = "rows" if name == "vis_ids" else "columns"
            raise InputError(
                f"{where}: {len(ids)} {name} for the {size} {axis} of sim_mat {list(sim.shape)}"
            )
        seen: dict[str, int] = {}
        for i, one in enumerate(ids):
            if one in seen:
                raise InputError(f"{where}: {name} repeats {one!r} (at {seen[one]} and {i})")
            seen[one] = i
    if not np.isfinite(sim).all():
        row, col = np.argwhere(~np.isfinite(sim))[0].tolist()
        raise InputError(
            f"{where}: sim_mat has non-finite values (first at row {row} "
            f"{submission.vis_ids[row]!r}, column {col} {submission.txt_ids[col]!r})"
        )
    for key in SUPERVISION:
        level = submission.supervision.get(key)
        if type(level) is not int or level not in SLS_RANGE:
            raise InputError(
                f"{where}: {key} is {level!r}: the challenge's supervision levels are "
                f"integers {SLS_RANGE.start} to {SLS_RANGE.stop - 1}"
            )


def align(entry: Submission, vis_ids: Sequence[str], txt_ids: Sequence[str], where: str):
    """`entry`'s similarity with its rows in the order of `vis_ids` and its columns in the
    order of `txt_ids` (the test tables'), matched by id.

    Raises:
      InputError: the file lacks an id of the tables, or holds one they do not.
    """
    rows = _positions(entry.vis_ids, vis_ids, "vis_ids", "clip", where)
    cols = _positions(entry.txt_ids, txt_ids, "txt_ids", "sentence", where)
    return entry.sim[np.ix_(rows, cols)]


def _positions(have: list[str], want: Sequence[str], name: str, what: str, where: str):
    index = {one: i for i, one in enumerate(have)}
    missing = [one for one in want if one not in index]
    if missing:
        raise InputError(
            f"{where}: {name} lacks {len(missing)} of the {len(want)} test {what}s of the "
            f"table (first {missing[0]!r}): score every test {what}"
        )
    if len(have) != len(want):
        wanted = set(want)
        extra = [one for one in have if one not in wanted]
        raise InputError(
            f"{where}: {name} holds {len(extra)} {what}s that are not in the test table "
            f"(first {extra[0]!r}): is it a submission for these tables?"
        )
    return np.array([index[one] for one in want], dtype=np.int64)


def _ids(value: Any, name: str, where: str) -> list[str]:
    ids = value.ids if isinstance(value, _Index) else value
    if isinstance(ids, np.ndarray):
        ids = ids.tolist()
    if not isinstance(ids, list | tuple) or not all(isinstance(i, str) for i in ids):
        raise InputError(f"{where}: {name} is not a list of narration_id strings")
    return list(ids)


class _Index:
    """A pandas Index of string ids, pickled as pandas pickles one (module docstring)."""

    def __init__(self, ids: Sequence[str], name: str | None = INDEX_NAME):
        self.ids, self.name = list(ids), name

    def __reduce__(self):
        data = np.array(self.ids, dtype=object)
        return _NewIndex, (_IndexClass, {"data": data, "name": self.name})


class _PandasName:
    """A stand-in for a pandas global, written by its module and name (never imported)."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle wants a callable here; it is never called
        raise TypeError(f"{self.module}.{self.name} stands in for pandas' and is not callable")


_NewIndex = _PandasName(*_PANDAS_NEW_INDEX)
_IndexClass = _PandasName(*_PANDAS_INDEX)


class _PandasFreePickler(pickle._Pickler):  # the Python pickler: its dispatch can be extended
    """Writes `_PandasName`s as the globals they stand for (as pickle writes a global at
    protocol 4: module, name, STACK_GLOBAL); the rest as pickle does."""

    dispatch = pickle._Pickler.dispatch.copy()

    def _save_pandas_name(self, obj: _PandasName) -> None:
        self.save(obj.module)
        self.save(obj.name)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)

    dispatch[_PandasName] = _save_pandas_name


_ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
}


class _Unpickler(pickle.Unpickler):
    """Unpickles NumPy arrays and pandas' Index of ids (as `_Index`, also pandas 3's string
    Index: a `StringArray` of Python strings), nothing else (module docstring)."""

    def find_class(self, module: str, name: str):
        stand_in = _PANDAS_STAND_INS.get((module, name))
        if stand_in is not None:
            return stand_in
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise InputError(
            f"the pickle refers to {module}.{name}, which a challenge file does not hold: "
            "not loaded (write the ids as a list or a pandas Index of strings)"
        )


class _StringArray:
    """pandas 3's array of Python strings (`pandas.arrays.StringArray`): its ids."""

    data: np.ndarray | None = None

    def __setstate__(self, state) -> None:  # (dtype, ndarray of the strings)
        arrays = [x for x in state if isinstance(x, np.ndarray)] if isinstance(state, tuple) else []
        if len(arrays) != 1:
            raise InputError("the pickle holds a pandas string array jaxsvr cannot read")
        self.data = arrays[0]


def _unpickle_backed(cls, checksum, state) -> _StringArray:
    if cls is not _StringArray:
        raise InputError("the pickle holds a pandas array jaxsvr cannot read")
    array = _StringArray()
    if state is not None:
        array.__setstate__(state)
    return array


def _string_dtype(*args) -> str:
    return "string"


def _new_index(cls, d: dict) -> _Index:
    if cls is not _Index or not isinstance(d, dict) or "data" not in d:
        raise InputError("the pickle holds an index jaxsvr cannot read")
    data = d["data"]
    if isinstance(data, _StringArray):
        data = data.data
    return _Index(data.tolist() if isinstance(data, np.ndarray) else data, d.get("name"))


_PANDAS_STAND_INS = {
    _PANDAS_NEW_INDEX: _new_index,
    _PANDAS_INDEX: _Index,
    _PANDAS_INDEX_BEFORE_3: _Index,
    ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"): _unpickle_backed,
    ("pandas.arrays", "StringArray"): _StringArray,
    ("pandas.core.arrays.string_", "StringArray"): _StringArray,
    ("pandas", "StringDtype"): _string_dtype,
    ("pandas.core.arrays.string_", "StringDtype"): _string_dtype,
    ("pandas", "NA"): "NA",  # a string dtype's missing value, unused: ids are never missing
}
