"""Text and GPTs from Python: the tokenizers, token files, windows of a TokenDataset (by offset and
drawn for fit), a GPT trained on them, generate (past the context), and Hugging Face GPT-2 files
written and read back."""

import numpy as np
import pytest

import mixprec as mp


def test_byte_tokenizer_and_token_files(tmp_path):
    tok = mp.data.ByteTokenizer()
    assert (tok.name, tok.vocab_size, tok.end_of_text) == ("byte", 257, 256)
    ids = tok.encode("héllo")
    assert ids == list("héllo".encode())
    assert tok.decode(ids + [tok.end_of_text]) == "héllo".encode() + b"<|endoftext|>"
    path = str(tmp_path / "t.tok")
    mp.data.write_token_file(path, ids, 257)
    back = mp.data.read_token_file(path)
    assert back.dtype == np.int32 and back.tolist() == ids
    with pytest.raises(ValueError):
        mp.data.write_token_file(path, [300], 257)
    with pytest.raises(ValueError):
        tok.decode([257])


def test_token_dataset_windows(tmp_path):
    path = str(tmp_path / "w.tok")
    ids = list(range(100))
    mp.data.write_token_file(path, ids, 257)
    data = mp.data.TokenDataset(path, validation_fraction=0.2)
    assert (data.vocab_size, data.size, data.train_tokens, data.validation_tokens) == (257, 100, 80, 20)
    x, y = data.windows([0, 5, data.train_tokens], 4)
    assert x.dtype == np.int32 and x.shape == (3, 4) and y.shape == (3, 4)
    assert x.tolist() == [[0, 1, 2, 3], [5, 6, 7, 8], [80, 81, 82, 83]]
    assert y.tolist() == [[1, 2, 3, 4], [6, 7, 8, 9], [81, 82, 83, 84]]
    with pytest.raises(ValueError):
        data.windows([96], 4)  # 96 + 4 + 1 tokens pass the end


def test_token_windows_drawn_from_the_training_part(tmp_path):
    ids = np.arange(3000, dtype=np.int32)  # token i at offset i: a window's first token is its start
    path = str(tmp_path / "r.tok")
    mp.data.write_token_file(path, ids, 3000)
    data = mp.data.TokenDataset(path, validation_fraction=0.1)
    t, b = 16, 8
    train = data.train_windows(t, batch_size=b, epochs=2, seed=11)
    assert (train.context, train.batch_size) == (t, b)
    assert train.steps_per_epoch == data.train_tokens // (b * t)  # about one pass an epoch
    assert len(train) == b * train.steps_per_epoch * 2
    batches = list(train)
    assert len(batches) == len(train) // b
    x = np.concatenate([xb for xb, _ in batches])
    y = np.concatenate([yb for _, yb in batches])
    assert x.dtype == np.int32 and x.shape == (len(train), t)
    starts = x[:, 0]
    assert (x == starts[:, None] + np.arange(t)).all() and (y == x + 1).all()
    assert starts.min() >= 0 and starts.max() + t + 1 <= data.train_tokens  # never in validation
    assert len(np.unique(starts)) > len(starts) // 2  # drawn, not a fixed stride
    same = np.concatenate([xb for xb, _ in data.train_windows(t, batch_size=b, epochs=2, seed=11)])
    other = np.concatenate([xb for xb, _ in data.train_windows(t, batch_size=b, epochs=2, seed=12)])
    assert (same == x).all() and not (other == x).all()

    val = data.validation_windows(t)
    assert val.batch_size is None and len(val) == (data.validation_tokens - 1) // t
    vx, vy = val.batch(0, len(val))
    assert vx[:, 0].tolist() == [data.train_tokens + i * t for i in range(len(val))]
    assert (vy == vx + 1).all()

    with pytest.raises(ValueError, match="training part"):
        data.train_windows(data.train_tokens, batch_size=b)
    with pytest.raises(ValueError):
        mp.data.TokenDataset.from_tokens([1, 2, 300], 257)


def test_text_documents_and_the_cli_text_dataset(tmp_path):
    corpus = tmp_path / "fortunes"
    corpus.mkdir()
    (corpus / "one").write_bytes(b"first saying\n%\nsecond\n  one\n%\n \n%\n")
    (corpus / "one.dat").write_bytes(b"\x00\x01index")  # strfile's index: not text
    assert mp.data.read_text_documents(str(corpus)) == [b"first saying", b"second\n  one"]
    data = mp.data.open_text_dataset(str(corpus))  # bytes, end-of-text after each document
    expected = list(b"first saying") + [256] + list(b"second\n  one") + [256]
    assert (data.vocab_size, data.size) == (257, len(expected))
    x, _ = data.windows([0], len(expected) - 1)
    assert x[0].tolist() == expected[:-1]
    path = str(tmp_path / "c.tok")  # a token file is mapped as it is
    mp.data.write_token_file(path, expected, 257)
    assert mp.data.open_text_dataset(path).size == len(expected)
    with pytest.raises(mp.errors.DataError, match="nothing-here"):
        mp.data.open_text_dataset(str(tmp_path / "nothing-here"))


def test_gpt_fits_token_windows(tmp_path):
    mp.set_seed(5)
    tok = mp.data.ByteTokenizer()
    ids = tok.encode("the quick brown fox jumps over the lazy dog. " * 40)
    data = mp.data.TokenDataset.from_tokens(ids, tok.vocab_size, validation_fraction=0.2)
    t = 16
    train = data.train_windows(t, batch_size=8, epochs=3, seed=5)
    val = data.validation_windows(t)
    gpt = mp.applications.GPT(layers=1, width=32, heads=2, context=t, vocab=257)
    gpt.compile(optimizer=mp.optimizers.AdamW(learning_rate=3e-3),
                loss=mp.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = gpt.fit(train, epochs=3, verbose=0, validation_data=val)
    assert len(history.history["loss"]) == 3
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["val_loss"][-1] < history.history["val_loss"][0]
    # fit's validation is evaluate on the same windows
    assert gpt.evaluate(val, verbose=0) == pytest.approx(history.history["val_loss"][-1], rel=1e-6)
    assert gpt.predict(val).shape == (len(val), t, 257)
    with pytest.raises(ValueError, match="y must be None"):
        gpt.fit(train, np.zeros((len(train), t), np.int32), verbose=0)


def test_gpt_trains_on_token_windows_generates_and_round_trips(tmp_path):
    mp.set_seed(3)
    tok = mp.data.ByteTokenizer()
    ids = np.asarray(tok.encode("the quick brown fox jumps over the lazy dog. " * 20), np.int32)
    t = 16
    starts = np.arange(0, len(ids) - t - 1, 7)
    x = np.stack([ids[s:s + t] for s in starts])
    y = np.stack([ids[s + 1:s + t + 1] for s in starts])
    gpt = mp.applications.GPT(layers=1, width=32, heads=2, context=t, vocab=257)
    gpt.compile(optimizer=mp.optimizers.AdamW(learning_rate=3e-3),
                loss=mp.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = gpt.fit(x, y, batch_size=16, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]

    prompt = tok.encode("the quick")
    greedy = mp.applications.generate(gpt, prompt, max_tokens=40, temperature=0.0)
    assert greedy[:9] == prompt and len(greedy) == 49  # past the context of 16: the window slides
    assert all(0 <= i < 257 for i in greedy)
    sampled = mp.applications.generate(gpt, prompt, max_tokens=20, temperature=1.0, seed=4)
    assert sampled == mp.applications.generate(gpt, prompt, max_tokens=20, temperature=1.0, seed=4)
    with pytest.raises(ValueError, match="temperature"):
        mp.applications.generate(gpt, prompt, temperature=-1.0)

    directory = str(tmp_path / "hf")
    mp.applications.save_gpt2_huggingface(gpt, directory)
    back = mp.applications.load_gpt2_huggingface(directory)
    assert (mp.applications.generate(back, prompt, max_tokens=24, temperature=0.0)
            == greedy[:9 + 24])
