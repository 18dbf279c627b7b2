"""Hotwords (issue 82): the bonus in every search that takes it, kept to the end; no list = today's bytes in every
mode; the refusals of bad lists at every entry point (naming the file and line) and of the options in a mode that
does not take them."""
import logging
import math
import random

import pytest
import soundfile as sf
import torch

from tests.decode.decode_helpers import write_clips, write_list
from tests.lm.lm_helpers import need_flashlight
from tests.train.train_helpers import WORDS, make_model_dir
from wenet_udps.bin import recognize
from wenet_udps.decode import hotwords as hotword_file
from wenet_udps.transformer.context_graph import ContextGraph
from wenet_udps.transformer.decode_options import CONTEXT_MODES
from wenet_udps.transformer.joint_search import joint_beam_search
from wenet_udps.transformer.modes import DECODING_METHODS, LM_METHODS
from wenet_udps.transformer.search import DecodeResult, attention_rescoring, ctc_prefix_beam_search, \
    score_hypotheses
from wenet_udps.utils.cli import UserError
from wenet_udps.utils.common import IGNORE_ID, add_sos_eos, log_add, pad_list


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    """A streaming model whose units have the word boundary '▁' (so joint_ctc_attention_lm runs too)."""
    import wenet_udps
    tmp = tmp_path_factory.mktemp("exp")
    conf, ckpt = make_model_dir(tmp, space=True, chunks={"use_dynamic_chunk": True})
    clips = write_clips(tmp, 3)
    return {"dir": tmp, "conf": conf, "ckpt": ckpt, "clips": clips, "list": write_list(clips, tmp / "test.list"),
            "model": wenet_udps.load_model(str(tmp), checkpoint="avg.pt")}


def encoded(exp, clip=2):
    """(ASRModel, encoder output (1, T', D), mask, CTC log-probs) of one clip."""
    model = exp["model"]
    _, feats = model.features(str(exp["clips"][clip]))
    feats = feats.unsqueeze(0)
    with torch.no_grad():
        out, mask = model.model.encode(feats, torch.tensor([feats.size(1)]), -1, -1, False)
        return model.model, out, mask, model.model.ctc_logprobs(out)


def fingerprint(results):
    return [(r.tokens, r.score.hex(), r.nbest, [s.hex() for s in r.nbest_scores]) for r in results]


def lm_search(exp, tmp_path):
    """An LmSearch over the digit words (None without flashlight-text)."""
    from tests.lm.test_search import write_arpa
    from wenet_udps.lm.search import LmSearch, LmSearchConfig
    try:
        need_flashlight()
    except pytest.skip.Exception:
        return None
    model = exp["model"]
    return LmSearch(write_arpa(tmp_path / "lm.arpa", {w: -1.0 for w in WORDS}), model.tokenizer,
                    model.model.ctc.blank_id, LmSearchConfig(beam_size=4))


def test_a_graph_that_never_matches_gives_the_bytes_of_no_graph_in_every_biased_mode(exp, tmp_path):
    """The biased code paths themselves (not only the None short cut): a phrase of a unit no model emits leaves
    every score, n-best and text bit-identical to decoding without hotwords (the LM modes too, with an LM)."""
    asr, out, mask, _ = encoded(exp)
    never = ContextGraph([((10 ** 6, 10 ** 6 + 1), 5.0)])
    search = lm_search(exp, tmp_path)
    modes = [m for m in CONTEXT_MODES if search is not None or m not in LM_METHODS]
    plain = asr.search(modes, out, mask, 4, lm_search=search)
    biased = asr.search(modes, out, mask, 4, context=never, lm_search=search)
    for mode in modes:
        assert fingerprint(plain[mode]) == fingerprint(biased[mode]), mode


def test_the_lm_search_keeps_only_completed_bonus(exp, tmp_path):
    search = lm_search(exp, tmp_path)
    if search is None:
        pytest.skip("flashlight-text is not installed")
    _, _, _, logp = encoded(exp)
    lens = torch.tensor([logp.size(1)])
    plain = search(logp, lens)[0]
    unbiased = dict(zip(map(tuple, plain.nbest), plain.nbest_scores))
    changed = common = 0
    for word in WORDS:  # a phrase across the word boundary too: the space unit is in the spelling
        for score in (0.2, 3.0):
            phrase = search.units([search.word_dict.get_index(w) for w in (word, "ONE")])
            graph = ContextGraph([(phrase, score)])
            biased = search(logp, lens, context=graph)[0]
            for hyp, total, context in zip(biased.nbest, biased.nbest_scores, biased.nbest_context):
                assert context == pytest.approx(graph.final_bonus(hyp))
                if tuple(hyp) in unbiased:  # the score is the search's own plus the kept bonus, nothing more
                    assert total == pytest.approx(unbiased[tuple(hyp)] + context, abs=1e-6)
                    common += 1
            changed += biased.tokens != plain.tokens
    assert changed and common


def test_no_hotwords_or_an_empty_list_is_todays_bytes_in_every_mode(exp, tmp_path):
    """Every mode of the registry (the LM modes with an LM): hotwords=[] gives the texts of no hotwords, through
    decode_list, transcribe and stream."""
    from tests.lm.test_search import write_arpa
    model = exp["model"]
    lm_ok = True
    try:
        need_flashlight()
    except pytest.skip.Exception:
        lm_ok = False
    lm = {"lm": write_arpa(tmp_path / "lm.arpa", {w: -1.0 for w in WORDS})} if lm_ok else {}
    modes = [m for m in DECODING_METHODS if lm_ok or m not in LM_METHODS]
    assert len(modes) >= 5
    plain = model.decode_list(str(exp["list"]), modes=modes, beam_size=4, **lm).texts
    empty = model.decode_list(str(exp["list"]), modes=modes, beam_size=4, hotwords=[], **lm).texts
    assert plain == empty
    wav = str(exp["clips"][1])
    for mode in modes:
        with_lm = lm if mode in LM_METHODS else {}
        assert model.transcribe(wav, mode=mode, beam_size=4, hotwords=[], **with_lm) == plain[mode]["utt1"], mode
    samples, rate = sf.read(wav, dtype="float32")
    for hot in (None, []):
        stream = model.stream(4, mode="attention_rescoring", beam_size=4, **({} if hot is None else
                                                                              {"hotwords": hot}))
        stream.accept_waveform(samples, rate)
        texts = stream.finish()
        assert texts == model.transcribe(wav, mode="attention_rescoring", beam_size=4, decoding_chunk_size=4,
                                         simulate_streaming=True)


def emissions(rows, vocab=6):
    """(1, T, V) log-probabilities: each row {unit: probability}, the rest on the blank (unit 0)."""
    logp = torch.full((1, len(rows), vocab), -30.0)
    for t, row in enumerate(rows):
        for unit, p in row.items():
            logp[0, t, unit] = math.log(p)
        logp[0, t, 0] = math.log(max(1e-9, 1.0 - sum(row.values())))
    return logp


FRAMES = [{1: 0.9}, {}, {2: 0.9}, {}, {4: 0.55, 3: 0.4}, {}]  # "1 2 4", with "1 2 3" a close second


def test_the_prefix_search_takes_a_completed_phrase_and_keeps_only_completed_bonus():
    logp, lens = emissions(FRAMES), torch.tensor([len(FRAMES)])
    plain = ctc_prefix_beam_search(logp, lens, 8)[0]
    assert plain.tokens == [1, 2, 4] and not plain.nbest_context
    completed = ContextGraph([((1, 2, 3), 1.0)])
    biased = ctc_prefix_beam_search(logp, lens, 8, context=completed)[0]
    assert biased.tokens == [1, 2, 3]
    assert biased.nbest_context[0] == pytest.approx(3.0)
    for hyp, context in zip(biased.nbest, biased.nbest_context):  # every hypothesis keeps what it completed only
        assert context == pytest.approx(completed.final_bonus(hyp))
    # a phrase nobody completes: its partial match steered the search, but at the end it is all taken back
    partial = ContextGraph([((1, 2, 3, 5), 1.0)])
    taken_back = ctc_prefix_beam_search(logp, lens, 8, context=partial)[0]
    assert taken_back.tokens == plain.tokens
    assert taken_back.nbest_context == [0.0] * len(taken_back.nbest)
    assert taken_back.score == pytest.approx(plain.score)


def reference_prefix_search(logp, beam_size, graph):
    """The prefix search with hotwords as it was first written (issue 82): each prefix's (state, bonus) in a dict
    of its own, from its parent's by ``ContextGraph.step``, with F2's cut; the oracle of the faster search."""
    hyps, bonus = [((), (0.0, -math.inf))], {(): (0, 0.0)}
    top_logp, top_idx = (x.tolist() for x in logp.topk(min(beam_size, logp.size(1)), dim=1))
    for t in range(logp.size(0)):
        nxt = {}
        for ps, s in zip(top_logp[t], top_idx[t]):
            for prefix, (pb, pnb) in hyps:
                if s == 0:
                    entry = nxt.setdefault(prefix, [-math.inf, -math.inf])
                    entry[0] = log_add(entry[0], pb + ps, pnb + ps)
                elif prefix and s == prefix[-1]:
                    entry = nxt.setdefault(prefix, [-math.inf, -math.inf])
                    entry[1] = log_add(entry[1], pnb + ps)
                    entry = nxt.setdefault(prefix + (s,), [-math.inf, -math.inf])
                    entry[1] = log_add(entry[1], pb + ps)
                else:
                    entry = nxt.setdefault(prefix + (s,), [-math.inf, -math.inf])
                    entry[1] = log_add(entry[1], pb + ps, pnb + ps)
        live = [kv for kv in nxt.items() if log_add(*kv[1]) > -math.inf]
        for prefix, _ in live:
            if prefix not in bonus:
                state, got = bonus[prefix[:-1]]
                state, delta = graph.step(state, prefix[-1])
                bonus[prefix] = (state, got + delta)
        def kept(kv):
            return log_add(*kv[1]) + bonus[kv[0]][1] + graph.end(bonus[kv[0]][0])

        if t == logp.size(0) - 1:  # the last cut: by the kept bonus (issue 82, F2)
            ranked = sorted(live, key=kept, reverse=True)[:beam_size]
        else:  # the beam, and the best by its kept bonus where the beam lacks it
            ranked = sorted(live, key=lambda kv: log_add(*kv[1]) + bonus[kv[0]][1], reverse=True)
            best = max(ranked, key=kept)
            ranked = ranked[:beam_size] + ([best] if best not in ranked[:beam_size] else [])
        bonus = {prefix: bonus[prefix] for prefix, _ in ranked}
        hyps = ranked
    kept = [(p, log_add(*s), bonus[p][1] + graph.end(bonus[p][0])) for p, s in hyps]
    return sorted(((p, score + b, b) for p, score, b in kept), key=lambda h: h[1], reverse=True)[:beam_size]


def reference_joint_bonus(search, cand):
    """The joint search's candidate bonus as it was first written: ``step`` per candidate, in Python."""
    bonus, states = [], []
    for got, state, units in zip(search.live.bonus.tolist(), search.live.state.tolist(), cand.tolist()):
        steps = [(0, search.context.end(state)) if u == search.eos else search.context.step(state, u) for u in units]
        bonus.append([got + d for _, d in steps])
        states.append([n for n, _ in steps])
    return torch.tensor(bonus, dtype=torch.float64), torch.tensor(states, dtype=torch.long)


def test_both_graph_builders_make_the_bare_word_boundary_free(exp, tmp_path):
    """Issue 82's no-harm check: with units that write '▁' apart (AN4's BPE: every word, every phrase starts with
    it), a paid '▁' gave every word start a bonus. The hotword list (``context_graph``) and the per-utterance
    context list (``UtteranceContexts``) both build their graphs with it free: it earns nothing, the letters are
    paid."""
    tokenizer = exp["model"].tokenizer
    space = tokenizer.symbol_table["\u2581"]
    keys = [f"u{i}" for i in range(3)]
    lists = write(tmp_path / "lists", "".join(f"{k}\tONE TWO\n" for k in keys))
    graphs = [hotword_file.context_graph(["ONE TWO"], tokenizer, 2.0),
              hotword_file.UtteranceContexts(str(lists), tokenizer, 2.0, (), keys, "test").graph("u1")]
    spelled = tokenizer.tokenize("ONE TWO")[1]
    assert spelled.count(space) == 1 and len(spelled) == 7
    for graph in graphs:
        state = 0
        for unit in spelled[:4]:
            state, delta = graph.step(state, unit)
        assert delta == 0.0                                           # the boundary: nothing
        assert graph.final_bonus(spelled) == pytest.approx(2.0 * 6)   # six letters at 2


@pytest.mark.parametrize("rows", ["every state's", "per call"])
def test_the_fast_searches_give_the_bytes_of_the_step_by_step_ones(exp, tmp_path, monkeypatch, rows):
    """With a dense list (every unit begins a phrase; overlaps, nested phrases), the prefix search and the joint
    searches give bit for bit what the first, step-by-step code gave: tokens, scores, n-best, kept bonus."""
    from wenet_udps.transformer import context_table
    from wenet_udps.transformer.joint_search import _Search
    if rows == "per call":
        monkeypatch.setattr(context_table, "FULL_CELLS", 0)
        monkeypatch.setattr(context_table, "CALL_CELLS", 200)
    asr, out, mask, logp = encoded(exp)
    rng = random.Random(82)
    units = list(range(2, asr.eos))
    graph = ContextGraph(list({tuple(rng.choice(units) for _ in range(rng.randint(1, 3))): rng.choice([1.5, 4.0])
                               for _ in range(300)}.items()))
    lens = torch.tensor([logp.size(1)])
    for beam in (2, 5):
        got = ctc_prefix_beam_search(logp, lens, beam, context=graph)[0]
        want = reference_prefix_search(logp[0], beam, graph)
        assert [tuple(h) for h in got.nbest] == [h[0] for h in want]
        assert [s.hex() for s in got.nbest_scores] == [h[1].hex() for h in want]
        assert [b.hex() for b in got.nbest_context] == [h[2].hex() for h in want]
    search = lm_search(exp, tmp_path)
    modes = ["joint_ctc_attention"] + (["joint_ctc_attention_lm"] if search is not None else [])
    fast = asr.search(modes, out, mask, 4, context=graph, lm_search=search)
    monkeypatch.setattr(_Search, "_bonus", reference_joint_bonus)
    slow = asr.search(modes, out, mask, 4, context=graph, lm_search=search)
    for mode in modes:
        assert fingerprint(fast[mode]) == fingerprint(slow[mode]), mode
    assert fast["joint_ctc_attention"][0].tokens != asr.search(["joint_ctc_attention"], out, mask, 4)[
        "joint_ctc_attention"][0].tokens  # (the list does steer the search)


def test_rescoring_carries_the_bonus_with_its_own_weight(exp):
    asr, out, mask, _ = encoded(exp)
    lens = mask.squeeze(1).sum(1)
    nbest = [[5, 6, 7], [5, 6], [8]]
    ctc = [-3.0, -4.0, -5.0]
    bonus = [2.0, 0.0, 1.5]
    res = DecodeResult(tokens=nbest[0], nbest=nbest, nbest_scores=[c + b for c, b in zip(ctc, bonus)],
                       nbest_context=bonus)
    scores = {}
    for weight in (0.0, 0.5, 1.0):
        out_res = attention_rescoring(asr, [res], out, lens, ctc_weight=0.3, context_weight=weight)[0]
        scores[weight] = dict(zip(map(tuple, out_res.nbest), out_res.nbest_scores))
    hyps = pad_list([torch.tensor(h) for h in nbest], IGNORE_ID)
    ys_in, _ = add_sos_eos(hyps, asr.sos, asr.eos, IGNORE_ID)
    dec, _ = asr.forward_attention_decoder(ys_in, torch.tensor([len(h) + 1 for h in nbest]), out, 0.0, lens,
                                           torch.zeros(len(nbest), dtype=torch.long))
    decoder = score_hypotheses(dec, nbest, asr.eos)
    for weight, got in scores.items():
        for h, d, c, b in zip(nbest, decoder, ctc, bonus):  # the CTC weight never scales the bonus
            assert got[tuple(h)] == pytest.approx(d + 0.3 * c + weight * b, abs=1e-4)


def test_the_joint_search_scores_are_the_decoder_plus_the_kept_bonus(exp):
    """ctc_weight 0: a joint result's score is the decoder's log-probability of its tokens and eos plus the bonus
    of the phrases it completed, whatever partial matches it went through."""
    asr, out, mask, logp = encoded(exp)
    plain = joint_beam_search(asr.decoder, out, mask, logp, 4, asr.sos, asr.eos, 0, ctc_weight=0.0)[0]
    tokens = plain.tokens
    assert len(tokens) >= 4
    graph = ContextGraph([(tokens[1:3], 2.0), ((tokens[0], 10 ** 6), 3.0), ((tokens[2], tokens[3]), 1.0)])
    result = joint_beam_search(asr.decoder, out, mask, logp, 4, asr.sos, asr.eos, 0, ctc_weight=0.0,
                               context=graph)[0]
    hyps = pad_list([torch.tensor(result.tokens)], IGNORE_ID)
    ys_in, _ = add_sos_eos(hyps, asr.sos, asr.eos, IGNORE_ID)
    dec, _ = asr.forward_attention_decoder(ys_in, torch.tensor([len(result.tokens) + 1]), out, 0.0,
                                           mask.squeeze(1).sum(1), torch.zeros(1, dtype=torch.long))
    decoder = score_hypotheses(dec, [result.tokens], asr.eos)[0]
    if len(result.tokens) == out.size(1):  # ended at the step limit (T' tokens): no eos scored (ESPnet's rule)
        decoder -= float(dec[0, len(result.tokens), asr.eos].detach())
    assert result.score == pytest.approx(decoder + graph.final_bonus(result.tokens), abs=1e-3)
    assert graph.final_bonus(result.tokens) > 0  # it did take a phrase


def test_stream_and_chunked_modes_take_the_bonus(exp):
    model = exp["model"]
    wav = str(exp["clips"][2])
    samples, rate = sf.read(wav, dtype="float32")
    chunked = {"beam_size": 4, "decoding_chunk_size": 4, "simulate_streaming": True}
    for mode in ("ctc_prefix_beam_search", "attention_rescoring"):
        plain = model.transcribe(wav, mode=mode, **chunked)
        changed = {}  # the digit words that change the chunked text of this (untrained) model
        for word in WORDS:
            text = model.transcribe(wav, mode=mode, hotwords=[word], context_score=5.0, **chunked)
            if text != plain:
                changed[word] = text
        assert changed, mode
        word, biased = next(iter(changed.items()))
        stream = model.stream(4, mode=mode, beam_size=4, hotwords=[word], context_score=5.0)
        stream.accept_waveform(samples, rate)
        assert stream.finish() == biased


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_bad_lists_are_refused_naming_the_line(exp, tmp_path, monkeypatch, caplog):
    model, wav = exp["model"], str(exp["clips"][0])
    tokenizer = model.tokenizer
    cases = {"ONE\n\nQUIZ\n": r":3: the phrase 'QUIZ' cannot be spelled with the units .*'Q'",
             "": "no phrase", "\n  \n": "no phrase",
             "ONE :abc\n": r":1: score 'abc'", "TWO :0\n": r":1: score '0'", "SIX :99\n": r":1: score '99'",
             "ONE\nTW,O\n": r":2: punctuation ','", "<unk>\n": r":1: .*'<unk>' is not one of them"}
    for text, message in cases.items():
        path = write(tmp_path / "hot.txt", text)
        with pytest.raises(UserError, match=message):
            hotword_file.read_phrases(path, tokenizer, 1.0)
        with pytest.raises(UserError, match=message):  # the API, before any decoding
            model.transcribe(wav, mode="ctc_prefix_beam_search", hotwords=path)
    with pytest.raises(UserError, match=r"hotwords\[1\]: the phrase 'QUIZ'"):
        model.transcribe(wav, mode="ctc_prefix_beam_search", hotwords=["ONE", "QUIZ"])
    for broken in ("ONE\nTWO", "ONE\rTWO"):   # two lines of a file: not one phrase of a list
        with pytest.raises(UserError, match=r"hotwords\[1\]: .* holds a line break"):
            model.transcribe(wav, mode="ctc_prefix_beam_search", hotwords=["SIX", broken])
    assert hotword_file.read_lines(["ONE\n", "TWO\r\n"])[1] == [("hotwords[0]", "ONE", None),
                                                              ("hotwords[1]", "TWO", None)]   # readlines()' ends
    monkeypatch.setattr(hotword_file, "PHRASES_MAX", 2)
    with pytest.raises(UserError, match="more than 2 phrases: .*biases nearly every word"):
        hotword_file.read_phrases(write(tmp_path / "many.txt", "ONE\nTWO\nSIX\n"), tokenizer, 1.0)
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING):
        phrases = hotword_file.read_phrases(write(tmp_path / "dup.txt", "ONE\nTWO :2\nONE :4\n"), tokenizer, 1.0)
    assert len(phrases) == 2 and phrases[0][1] == 4.0
    assert "dup.txt:3" in caplog.text and "dup.txt:1" in caplog.text and "merged" in caplog.text


@pytest.mark.parametrize("mode", ["attention", "ctc_greedy_search"])
def test_a_mode_without_the_bonus_refuses_the_options(exp, tmp_path, mode, capsys):
    model, wav = exp["model"], str(exp["clips"][0])
    with pytest.raises(UserError, match=f"hotwords=.*applies to .*only, which modes {mode} does not run"):
        model.transcribe(wav, mode=mode, hotwords=["ONE"])
    with pytest.raises(UserError, match="context_score=2.0 applies to"):
        model.decode_list(str(exp["list"]), modes=[mode], context_score=2.0)
    path = write(tmp_path / "hot.txt", "ONE\n")
    with pytest.raises(SystemExit) as e:
        recognize.main(["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data",
                        str(exp["list"]), "--result_dir", str(tmp_path / "res"), "--modes", mode,
                        "--context_file", path])
    assert e.value.code == 2
    assert f"--context_file {path} applies to" in capsys.readouterr().err


def test_weights_without_hotwords_and_recognize_refusals(exp, tmp_path, capsys):
    model, wav = exp["model"], str(exp["clips"][0])
    with pytest.raises(UserError, match="context_weight=0.5 weighs the hotwords' bonus: give hotwords"):
        model.transcribe(wav, mode="attention_rescoring", context_weight=0.5)
    with pytest.raises(UserError, match="context_weight=0.5 applies to attention_rescoring and attention_rescoring_lm"):
        model.transcribe(wav, mode="joint_ctc_attention", hotwords=["ONE"], context_weight=0.5)
    with pytest.raises(UserError, match="hotwords=5: expected"):
        model.transcribe(wav, mode="attention_rescoring", hotwords=5)
    with pytest.raises(UserError, match=r"hotwords='ONE': ONE: no such file \(phrases go in a list: "
                                        r"hotwords=\['ONE'\]\)"):
        model.transcribe(wav, mode="attention_rescoring", hotwords="ONE")
    base = ["--config", str(exp["conf"]), "--checkpoint", str(exp["ckpt"]), "--test_data", str(exp["list"]),
            "--result_dir", str(tmp_path / "res"), "--modes", "attention_rescoring"]
    path = write(tmp_path / "hot.txt", "ONE\nQUIZ\n")
    with pytest.raises(SystemExit) as e:
        recognize.main(base + ["--context_file", path])
    assert e.value.code == 2 and f"{path}:2: the phrase 'QUIZ'" in capsys.readouterr().err
    assert not (tmp_path / "res" / "attention_rescoring" / "text").exists()  # refused before any decoding
    with pytest.raises(SystemExit):
        recognize.main(base + ["--context_score", "0"])
    assert "--context_score" in capsys.readouterr().err
    recognize.main(base + ["--context_file", write(tmp_path / "ok.txt", "SEVEN :4\n"), "--beam_size", "4"])
    info = (tmp_path / "res" / "attention_rescoring" / "decode.info").read_text(encoding="utf-8")
    assert "context_phrases" in info and "context_sha256" in info


def test_the_api_builds_a_list_once_and_a_rewritten_file_anew(exp, tmp_path, monkeypatch):
    """transcribe one file at a time: the graph of a list (or a file's content) is built at its first call only;
    a file rewritten is another list; a bad file is refused at every call."""
    model = exp["model"]
    built = []
    real = hotword_file.ContextGraph

    def counted(phrases, texts=(), free_units=()):
        built.append(len(phrases))
        return real(phrases, texts, free_units)

    monkeypatch.setattr(hotword_file, "ContextGraph", counted)
    wav = str(exp["clips"][1])
    hot = write(tmp_path / "hot.txt", "ONE\nTWO\n")
    first = [model.transcribe(wav, mode="ctc_prefix_beam_search", beam_size=4, hotwords=h) for h in (hot, hot)]
    assert built == [2] and first[0] == first[1]
    model.transcribe(wav, mode="ctc_prefix_beam_search", beam_size=4, hotwords=["ONE", "TWO", "SIX"])
    model.transcribe(wav, mode="ctc_prefix_beam_search", beam_size=4, hotwords=["ONE", "TWO", "SIX"])
    assert built == [2, 3]
    write(tmp_path / "hot.txt", "ONE\nTWO\nNINE\n")
    model.transcribe(wav, mode="ctc_prefix_beam_search", beam_size=4, hotwords=hot)
    assert built == [2, 3, 3]
    write(tmp_path / "hot.txt", "ONE, TWO\n")
    for _ in range(2):
        with pytest.raises(UserError, match="hot.txt:1"):
            model.transcribe(wav, mode="ctc_prefix_beam_search", beam_size=4, hotwords=hot)
