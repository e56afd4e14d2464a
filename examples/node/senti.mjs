// Load a senti export folder from disk in Node.js and score texts as senti.serving does (scorer.mjs).
import { readFileSync, realpathSync, statSync } from "node:fs";
import { resolve, sep } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import * as ort from "onnxruntime-node";
import { ExportError, FORMATS, Scorer } from "./scorer.mjs";

function inside(folder, name, what) {
  // a file of the export folder, never one a path or a link leads to outside it
  const root = realpathSync(folder);
  let path;
  try {
    path = realpathSync(resolve(root, name));
  } catch {
    throw new ExportError(`${folder}: ${what} ${name} is missing`);
  }
  if (!path.startsWith(root + sep)) {
    throw new ExportError(`${folder}: ${what} ${name} leads outside the export folder`);
  }
  if (!statSync(path).isFile()) {  // a FIFO or a folder was called a path outside the folder
    throw new ExportError(`${folder}: ${what} ${name} is not a regular file`);
  }
  return path;
}

export class Senti {
  static async load(folder, { format = "onnx", threads = 1 } = {}) {
    const meta = JSON.parse(readFileSync(inside(folder, "export.json", "metadata"), "utf8"));
    Scorer.checkMeta(meta, folder, format);
    const tokenizerJson = JSON.parse(readFileSync(inside(folder, "tokenizer.json", "tokenizer"), "utf8"));
    const tokenizerConfig = JSON.parse(readFileSync(inside(folder, "tokenizer_config.json", "tokenizer config"), "utf8"));
    const session = await ort.InferenceSession.create(inside(folder, FORMATS[format].file, `the ${format} model`), {
      intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential",
    });
    const model = new Scorer(meta, new Tokenizer(tokenizerJson, tokenizerConfig), session, format, ort);
    await model.checkParity(folder);
    return model;
  }
}

export { ExportError };
