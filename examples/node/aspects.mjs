// Aspect answers from a senti export, as senti.serving.aspects gives them: a text cut into sentences (or clauses),
// an aspect mentioned in a unit that holds one of its keywords, every mentioning unit scored once, an aspect's
// answer the mean probability of the positive label over its units. An export with aspect heads (`senti train
// --aspects`: labels "aspect/polarity") answers from its heads over the whole text instead. Offsets count characters (code points), as
// Python's do. The aspect list is checked as senti.core.aspects checks it: it is untrusted input.
import { ExportError } from "./scorer.mjs";

const SENTENCE_END = new Set([..."。！？!?；;\n\r…~～"]);
const CLAUSE_END = new Set([...SENTENCE_END, ..."，,、"]);
const POSITIVE_NAMES = ["positive", "pos", "1", "正面", "积极"];
const NEGATIVE_NAMES = ["negative", "neg", "0", "负面", "消极"];
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_ASPECTS = 256, MAX_KEYWORDS = 200, MAX_KEYWORD_CHARS = 32;
export const MAX_ASPECT_FILE_BYTES = 1 << 20;

function aspectOf(entry, where) {
  if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
    throw new ExportError(`${where}: expected an object with name and keywords`);
  }
  const { name, label = "", keywords } = entry;
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new ExportError(`${where}: name ${JSON.stringify(name)} must be 1-64 letters, digits, '_' or '-'`);
  }
  if (typeof label !== "string" || [...label].length > 64) {
    throw new ExportError(`${where} (${name}): label must be text of at most 64 characters`);
  }
  if (!Array.isArray(keywords) || !keywords.length || keywords.length > MAX_KEYWORDS) {
    throw new ExportError(`${where} (${name}): keywords must be a list of 1 to ${MAX_KEYWORDS} words`);
  }
  const cleaned = keywords.map((word) => {
    if (typeof word !== "string" || !word.trim() || [...word.trim()].length > MAX_KEYWORD_CHARS) {
      throw new ExportError(`${where} (${name}): keyword ${JSON.stringify(word)} must be non-empty text of at most ${MAX_KEYWORD_CHARS} characters`);
    }
    return word.trim();
  });
  return { name, label, keywords: [...new Set(cleaned)] };
}

export function parseAspects(data, where) {
  const entries = data !== null && typeof data === "object" && !Array.isArray(data) ? data.aspects : data;
  if (!Array.isArray(entries) || !entries.length) {
    throw new ExportError(`${where}: expected {"aspects": [...]} with at least one aspect`);
  }
  if (entries.length > MAX_ASPECTS) throw new ExportError(`${where}: ${entries.length} aspects; at most ${MAX_ASPECTS}`);
  const aspects = entries.map((entry, i) => aspectOf(entry, `${where}: aspect ${i + 1}`));
  const seen = new Set();
  for (const a of aspects) {
    if (seen.has(a.name)) throw new ExportError(`${where}: aspect name '${a.name}' appears twice`);
    seen.add(a.name);
  }
  return aspects;
}

function units(chars, unit) {
  // [start, end) of each non-blank sentence or clause, in code points
  const ends = unit === "clause" ? CLAUSE_END : SENTENCE_END;
  const spans = [];
  let start = 0;
  for (let i = 0; i < chars.length;) {
    if (!ends.has(chars[i])) { i++; continue; }
    let j = i;
    while (j < chars.length && ends.has(chars[j])) j++;
    spans.push([start, j]);
    start = i = j;
  }
  spans.push([start, chars.length]);
  return spans.filter(([a, b]) => chars.slice(a, b).join("").trim());
}

function mentions(text, aspects, unit) {
  const chars = [...text];
  const pieces = units(chars, unit).map(([a, b]) => {
    const piece = chars.slice(a, b).join("");
    const start = a + [...piece].length - [...piece.trimStart()].length;
    return { text: piece.trim(), start };
  });
  const found = {};
  for (const aspect of aspects) {
    for (const piece of pieces) {
      const keyword = aspect.keywords.find((k) => piece.text.includes(k));
      if (keyword === undefined) continue;
      (found[aspect.name] ??= []).push({ text: piece.text, start: piece.start, end: piece.start + [...piece.text].length, keyword });
    }
  }
  return found;
}

export function positiveLabel(labels) {
  const names = labels.map((l) => String(l).trim().toLowerCase());
  const pos = names.filter((n) => POSITIVE_NAMES.includes(n)), neg = names.filter((n) => NEGATIVE_NAMES.includes(n));
  if (labels.length !== 2 || pos.length !== 1 || neg.length !== 1) {
    throw new ExportError(`aspect answers need a two-class positive/negative model; this one has labels ${JSON.stringify(labels)}`);
  }
  return labels[names.indexOf(pos[0])];
}

function polarity(p, margin) {
  return p > 0.5 + margin ? "positive" : p < 0.5 - margin ? "negative" : "neutral";
}

const POLARITIES = ["positive", "neutral", "negative", "not_mentioned"];

export function headAspects(labels) {
  // the aspect names of a model with aspect heads (labels "aspect/polarity", aspect by aspect), else null
  if (!labels.length || labels.length % POLARITIES.length) return null;
  const names = labels.filter((_, i) => i % POLARITIES.length === 0).map((l) => l.slice(0, l.lastIndexOf("/")));
  const expected = names.flatMap((n) => POLARITIES.map((p) => `${n}/${p}`));
  return names.every((n) => NAME.test(n)) && expected.every((l, i) => l === labels[i]) ? names : null;
}

async function headAnswers(model, texts, aspects, found, heads) {
  // each aspect's four outputs made to sum to one, the likeliest answered, P(positive) among them as the score
  const missing = aspects.map((a) => a.name).filter((n) => !heads.includes(n));
  if (missing.length) {
    const named = heads.slice(0, 10).join(", ") + (heads.length > 10 ? ` (${heads.length} in all)` : "");
    throw new ExportError(`this model's aspect heads answer ${named}; it has no head for ${missing.slice(0, 5).join(", ")}`);
  }
  const distinct = [...new Set(texts)];
  const scored = await model.predict(distinct);
  const byText = new Map(distinct.map((t, i) => [t, scored[i].probabilities]));
  return texts.map((text, i) => Object.fromEntries(aspects.map((a) => {
    const p = byText.get(text);
    const share = POLARITIES.map((pol) => p[`${a.name}/${pol}`]);
    const total = share.reduce((s, x) => s + x, 0) || 1;
    const said = POLARITIES[share.indexOf(Math.max(...share))];
    if (said === "not_mentioned") return [a.name, { polarity: said, score: null, evidence: [] }];
    return [a.name, { polarity: said, score: Math.round((share[0] / total) * 1e6) / 1e6, evidence: found[i][a.name] ?? [] }];
  })));
}

export async function answerAspects(model, texts, aspects, { unit = "sentence", neutralMargin = 0 } = {}) {
  // one {aspect name: {polarity, score, evidence}} per text; `model` a Senti (predict(texts) -> answers)
  const heads = headAspects(model.labels);
  if (heads) return headAnswers(model, texts, aspects, texts.map((t) => mentions(t, aspects, unit)), heads);
  const positive = positiveLabel(model.labels);
  const found = texts.map((t) => mentions(t, aspects, unit));
  const pieces = [...new Set(found.flatMap((f) => Object.values(f).flat().map((e) => e.text)))].sort();
  const scored = await model.predict(pieces);
  const scores = new Map(pieces.map((p, i) => [p, scored[i].probabilities[positive]]));
  return found.map((perText) => Object.fromEntries(aspects.map((a) => {
    const evidence = perText[a.name] ?? [];
    if (!evidence.length) return [a.name, { polarity: "not_mentioned", score: null, evidence: [] }];
    const score = evidence.reduce((s, e) => s + scores.get(e.text), 0) / evidence.length;
    return [a.name, { polarity: polarity(score, neutralMargin), score: Math.round(score * 1e6) / 1e6, evidence }];
  })));
}
