// The scoring senti.serving does, free of any runtime: a tokenizers.js Tokenizer, an ONNX Runtime session (Node's or
// the browser's) and the export's metadata in; labels and probabilities out, the parity sample checked first.
// Used by senti.mjs (Node.js) and by examples/browser.

// serving.tokenizer: a text is read at most this many characters per token the model can take
const MAX_CHARS_PER_TOKEN = 64;
const HEAD_SLACK_CHARS = 64;
const SPECIALS_PER_TEXT = 2; // [CLS] text [SEP]
// serving.backends.FORMATS: file and parity tolerance of the formats this example runs
export const FORMATS = {
  "onnx": { file: "model.onnx", tolerance: ["atol", 1e-4] },
  "onnx-opt": { file: "model.opt.onnx", tolerance: ["atol", 1e-4] },
  "onnx-int8-static": { file: "model.int8-static.onnx", tolerance: ["agreement", 0.9] },
};

export class ExportError extends Error {}

function softmax(row) {
  const top = Math.max(...row);
  const exps = row.map((x) => Math.exp(x - top));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((x) => x / sum);
}

const finite = (x) => typeof x === "number" && Number.isFinite(x);

// senti.core.artifacts' Calibration.problem and Abstention.problem: refused at load, as senti.serving refuses them
function checkScores(meta, where) {
  const c = meta.calibration;
  if (c !== undefined && c !== null) {
    if (!finite(c.temperature) || c.temperature <= 0) {
      throw new ExportError(`${where}/export.json: calibration temperature must be a positive finite number; got ${JSON.stringify(c.temperature)}`);
    }
    if (c.bias !== undefined && c.bias !== null
        && (!Array.isArray(c.bias) || c.bias.length !== meta.labels.length || !c.bias.every(finite))) {
      throw new ExportError(`${where}/export.json: calibration bias must be ${meta.labels.length} finite numbers; got ${JSON.stringify(c.bias)}`);
    }
  }
  const a = meta.abstain;
  if (a !== undefined && a !== null && (!finite(a.threshold) || a.threshold < 0 || a.threshold > 1)) {
    throw new ExportError(`${where}/export.json: abstention threshold must be a number in [0, 1]; got ${JSON.stringify(a.threshold)}`);
  }
}

// senti.core.calibration.calibrated_probabilities: softmax(logits / temperature + bias), in doubles
export function calibrated(logits, calibration) {
  if (!calibration) return softmax(logits);
  const bias = calibration.bias ?? logits.map(() => 0);
  return softmax(logits.map((x, k) => x / calibration.temperature + bias[k]));
}

export class Scorer {
  // the metadata's own checks, before any model is opened
  static checkMeta(meta, where, format) {
    if (!FORMATS[format]) throw new ExportError(`format ${format}: this example runs ${Object.keys(FORMATS).join(", ")}`);
    if (!meta.formats?.[format]) throw new ExportError(`${where}: no ${format} model in this export`);
    const sample = meta.parity_sample;
    if (!sample?.texts?.length || !Array.isArray(sample.logits)) {
      throw new ExportError(`${where}/export.json: no parity sample to check the model against`);
    }
    // senti.serving.parity.MAX_PARITY_TEXTS: senti export records 16; 200,000 planted ones held the start for a minute
    const MAX_PARITY_TEXTS = 1024;
    if (sample.texts.length > MAX_PARITY_TEXTS) {
      throw new ExportError(`${where}/export.json: the parity sample holds more than ${MAX_PARITY_TEXTS} texts; senti export records 16`);
    }
    if (JSON.stringify(sample.labels) !== JSON.stringify(meta.labels)) {
      throw new ExportError(`${where}/export.json: labels ${JSON.stringify(meta.labels)} differ from those recorded with the parity answers`);
    }
    // senti.core.sequence's bounds, as senti.serving checks them: a max_seq_len of 4096 loaded and a long text killed Node
    const [MIN_SEQ_LEN, MAX_SEQ_LEN] = [8, 2048];
    if (!Number.isInteger(meta.max_seq_len) || meta.max_seq_len < MIN_SEQ_LEN || meta.max_seq_len > MAX_SEQ_LEN) {
      throw new ExportError(`${where}/export.json: max_seq_len must be between ${MIN_SEQ_LEN} and ${MAX_SEQ_LEN}; got ${JSON.stringify(meta.max_seq_len)}`);
    }
    checkScores(meta, where);
  }

  constructor(meta, tokenizer, session, format, ort) {
    this.ort = ort;
    this.meta = meta;
    this.labels = meta.labels;
    this.maxSeqLen = meta.max_seq_len;
    this.calibration = meta.calibration ?? null; // how logits become the probabilities answered
    this.threshold = meta.abstain?.threshold ?? null; // below it an answer is unsure
    this.tokenizer = tokenizer;
    this.session = session;
    this.format = format;
    const vocab = tokenizer.model.tokens_to_ids;
    this.cls = vocab.get(meta.tokenizer.cls_token);
    this.sep = vocab.get(meta.tokenizer.sep_token);
    this.pad = meta.tokenizer.pad_token_id;
    for (const [name, id] of [["cls_token", this.cls], ["sep_token", this.sep]]) {
      if (id === undefined) {
        throw new ExportError(`export.json: the tokenizer's ${name} ${JSON.stringify(meta.tokenizer[name])} is not in tokenizer.json`);
      }
    }
  }

  // [CLS] ids [SEP] of one text, cut to max_seq_len, reading no more of it than senti.serving reads
  encode(text) {
    const budget = this.maxSeqLen - SPECIALS_PER_TEXT;
    const limit = MAX_CHARS_PER_TOKEN * budget + HEAD_SLACK_CHARS;
    let read = text;
    if (text.length > limit) { // UTF-16 units: the limit counts code points, as Python does
      const points = Array.from(text);
      if (points.length > limit) read = points.slice(0, limit).join("");
    }
    const ids = this.tokenizer.encode(read, { add_special_tokens: false }).ids;
    return { ids: [this.cls, ...ids.slice(0, budget), this.sep], truncated: ids.length > budget || read !== text };
  }

  // [{logits, truncated}] of each text: one text a call, no padding, answers independent of batch-mates
  async score(texts) {
    const out = [];
    for (const text of texts) {
      const { ids, truncated } = this.encode(text);
      const shape = [1, ids.length];
      const feeds = {
        input_ids: new this.ort.Tensor("int64", BigInt64Array.from(ids.map(BigInt)), shape),
        token_type_ids: new this.ort.Tensor("int64", new BigInt64Array(ids.length), shape),
      };
      const result = await this.session.run(feeds);
      out.push({ logits: Array.from(result[this.session.outputNames[0]].data), truncated });
    }
    return out;
  }

  async logits(texts) {
    return (await this.score(texts)).map((s) => s.logits);
  }

  // label, score and probabilities (calibrated as export.json says), unsure, truncated and the raw logits of each text
  async predict(texts) {
    return (await this.score(texts)).map(({ logits, truncated }) => {
      const probs = calibrated(logits, this.calibration);
      const best = probs.indexOf(Math.max(...probs));
      return {
        label: this.labels[best], score: probs[best],
        probabilities: Object.fromEntries(this.labels.map((label, k) => [label, probs[k]])),
        unsure: this.threshold !== null && probs[best] < this.threshold,
        truncated, logits,
      };
    });
  }

  async checkParity(folder) {
    // refuse what senti.serving refuses: a model, vocabulary or metadata changed after export
    const sample = this.meta.parity_sample;
    const got = await this.logits(sample.texts);
    if (got[0].length !== this.labels.length) {
      throw new ExportError(`${folder}: the model gives ${got[0].length} logits per text but the metadata names ${this.labels.length} labels`);
    }
    let worst = 0;
    let agree = 0;
    got.forEach((row, i) => {
      row.forEach((x, k) => { worst = Math.max(worst, Math.abs(x - sample.logits[i][k])); });
      if (row.indexOf(Math.max(...row)) === sample.logits[i].indexOf(Math.max(...sample.logits[i]))) agree += 1;
    });
    agree /= got.length;
    const [kind, limit] = FORMATS[this.format].tolerance;
    if ((kind === "atol" && (worst > limit || agree < 1)) || (kind !== "atol" && agree < limit)) {
      throw new ExportError(`${folder}: the model does not reproduce its recorded parity answers (max |logit diff| ${worst.toExponential(2)}, label agreement ${agree.toFixed(2)}); the vocabulary, the model or the metadata was changed after export`);
    }
  }
}

