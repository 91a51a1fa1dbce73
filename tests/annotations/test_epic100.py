"""EPIC-KITCHENS-100 reader: real files, list parsing, malformed rows, narration order."""

import numpy as np
import pytest

from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.files.literals import parse_int_list, parse_str_list


def test_literals():
    assert parse_int_list("[2]") == [2]
    assert parse_int_list(" [2, 35 ,7] ") == [2, 35, 7]
    assert parse_int_list("[]") == []
    assert parse_str_list("['ring:onion', 'potato']") == ["ring:onion", "potato"]
    assert parse_str_list("[\"it's\", 'a, b']") == ["it's", "a, b"]
    for bad in ["2", "[2,,3]", "[a]", "[2", "__import__('os')"]:
        with pytest.raises(ValueError):
            parse_int_list(bad)
    for bad in ["plate", "[plate]", "['a' 'b']", "['a'"]:
        with pytest.raises(ValueError):
            parse_str_list(bad)


def test_real_test_split(epic_test):
    clips, sents = epic_test
    assert len(clips) == 9668 and len(sents) == 3842
    assert clips.narration_id[0] == "P01_11_0" and clips.narration[0] == "take plate"
    assert clips.verb_classes[0] == (0,) and clips.noun_classes[0] == (2,)
    assert clips.nouns[0] == ("plate",)
    assert clips.stop_s[0] == pytest.approx(1.89)
    # A test sentence takes the classes of the clip with its narration_id.
    row = clips.narration_id.index(sents.narration_id[5])
    assert sents.verb_classes[5] == clips.verb_classes[row]
    assert sents.noun_classes[5] == clips.noun_classes[row]
    assert max(clips.noun_classes.sizes) == 4


def test_narration_order(epic_test):
    clips, _ = epic_test
    videos = clips.video_clips()
    assert len(videos) == 138 and sum(map(len, videos.values())) == len(clips)
    order = videos["P01_11"]
    idx = [int(clips.narration_id[r].rsplit("_", 1)[1]) for r in order]
    assert idx == sorted(idx) and idx[:3] == [0, 1, 2]
    # The CSV itself is in text order (P01_11_109 before P01_11_11).
    assert clips.narration_id.index("P01_11_109") < clips.narration_id.index("P01_11_11")


def test_train_files_and_vocab(epic_dir):
    sents = epic100.read_sentences(epic_dir / epic100.TRAIN_SENTENCES)
    assert len(sents) == 15989 and sents.verb_classes[0] == (3,)
    clips = epic100.read_clips(epic_dir / epic100.TRAIN_CLIPS)
    assert len(clips) == 16115
    verbs = epic100.read_classes(epic_dir / epic100.VERB_CLASSES)
    nouns = epic100.read_classes(epic_dir / epic100.NOUN_CLASSES)
    assert (len(verbs), len(nouns)) == (97, 300)
    assert verbs.key[0] == "take" and "grab" in verbs.instances[0]
    assert verbs.synonyms()["grab"] == 0 and nouns.synonyms()["tap"] == 0


def _write(tmp_path, text, name="clips.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


HEADER = (
    "narration_id,participant_id,video_id,narration_timestamp,start_timestamp,stop_timestamp,"
    "start_frame,stop_frame,narration,verb,verb_class,noun,noun_class,all_nouns,all_noun_classes\n"
)
GOOD = (
    "P01_11_0,P01,P01_11,00:00:00.560,00:00:00.00,00:00:01.89,1,113,"
    "take plate,take,0,plate,2,['plate'],[2]\n"
)


def test_malformed_rows_name_file_line_column(tmp_path):
    bad_list = GOOD.replace("P01_11_0,", "P01_11_1,").replace(",[2]\n", ',"[2,,3]"\n')
    with pytest.raises(InputError, match=r"clips.csv:3: column 'all_noun_classes'"):
        epic100.read_clips(_write(tmp_path, HEADER + GOOD + bad_list))
    with pytest.raises(InputError, match=r"clips.csv:2: column 'verb_class' is 'x'"):
        epic100.read_clips(_write(tmp_path, HEADER + GOOD.replace(",take,0,", ",take,x,")))
    with pytest.raises(InputError, match=r"missing column\(s\) all_noun_classes"):
        epic100.read_clips(_write(tmp_path, HEADER.replace(",all_noun_classes", "") + GOOD))
    with pytest.raises(InputError, match=r"clips.csv:2: 14 fields"):
        epic100.read_clips(_write(tmp_path, HEADER + GOOD.replace(",[2]\n", "\n")))
    with pytest.raises(InputError, match="not found"):
        epic100.read_clips(tmp_path / "missing.csv")


def test_sentence_without_clip(tmp_path):
    clips = epic100.read_clips(_write(tmp_path, HEADER + GOOD))
    sents = _write(tmp_path, "narration_id,narration\nP01_11_0,take plate\nP9_1,x\n", "s.csv")
    with pytest.raises(InputError, match=r"s.csv:3: column 'narration_id' has no clip"):
        epic100.read_sentences(sents, clips)
    with pytest.raises(InputError, match="no verb_class/noun_classes columns"):
        epic100.read_sentences(sents)
    assert np.array_equal(clips.start_s, [0.0])


@pytest.mark.parametrize(
    "has_retrieval_train, train_clips, says",
    [
        (
            False,
            epic100.TRAIN_CLIPS,
            "EPIC_100_retrieval_train.csv (67217 clips), which this folder lacks",
        ),
        (True, epic100.TRAIN_CLIPS, "which this folder holds: config.data.train_clips to use it"),
        (True, epic100.RETRIEVAL_TRAIN_CLIPS, None),
    ],
)
def test_the_log_says_which_train_table(tmp_path, caplog, has_retrieval_train, train_clips, says):
    """The published numbers train on the retrieval split: the first lines say which table
    a run trains on, and whether the folder holds the published one (issue 29, part 4)."""
    from kitchen_files import write_epic_folder

    from jaxsvr.annotations import load

    write_epic_folder(tmp_path)
    if has_retrieval_train:
        (tmp_path / epic100.RETRIEVAL_TRAIN_CLIPS).write_bytes(
            (tmp_path / epic100.TRAIN_CLIPS).read_bytes()
        )
    caplog.set_level("INFO")
    load.epic100_folder(tmp_path, train_clips)
    (line,) = [r.getMessage() for r in caplog.records if "data: train clips" in r.getMessage()]
    assert line.startswith(f"data: train clips {train_clips} (120), test {epic100.TEST_CLIPS} (60")
    assert (says in line) if says else ("published" not in line)
