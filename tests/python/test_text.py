"""Text and GPTs from Python: the tokenizers, token files, a GPT trained on NumPy token windows,
generate (past the context), and Hugging Face GPT-2 files written and read back."""

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
