#!/usr/bin/env node
// node cli.mjs EXPORT_DIR [--format onnx] < texts.jsonl  ->  one JSON answer per input line (a JSON string or text)
// node cli.mjs EXPORT_DIR --aspects aspects.json [--unit clause] [--neutral-margin 0.1] < texts.jsonl
//   ->  one {aspect name: {polarity, score, evidence}} per input line, as `senti aspects` answers
import { openSync, readSync, closeSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { MAX_ASPECT_FILE_BYTES, answerAspects, parseAspects } from "./aspects.mjs";
import { Senti } from "./senti.mjs";

function readAspects(path) {
  // at most MAX_ASPECT_FILE_BYTES read, as senti.core.aspects reads an aspect file
  const fd = openSync(path, "r");
  const buffer = Buffer.alloc(MAX_ASPECT_FILE_BYTES + 1);
  const size = readSync(fd, buffer, 0, buffer.length, 0);
  closeSync(fd);
  if (size > MAX_ASPECT_FILE_BYTES) throw new Error(`${path}: the aspect file is larger than ${MAX_ASPECT_FILE_BYTES >> 20} MB`);
  let data;
  try {
    data = JSON.parse(buffer.subarray(0, size).toString("utf8"));
  } catch (err) {
    throw new Error(`${path}: the aspect file is not valid JSON (${err.message})`);
  }
  return parseAspects(data, path);
}

try {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { format: { type: "string", default: "onnx" }, aspects: { type: "string" },
               unit: { type: "string", default: "sentence" }, "neutral-margin": { type: "string", default: "0" } },
  });
  const aspects = values.aspects === undefined ? null : readAspects(values.aspects);
  const neutralMargin = Number(values["neutral-margin"]);
  if (!["sentence", "clause"].includes(values.unit)) throw new Error(`unit must be one of sentence, clause; got '${values.unit}'`);
  if (!(neutralMargin >= 0 && neutralMargin < 0.5)) throw new Error(`neutral_margin must be in [0, 0.5); got ${values["neutral-margin"]}`);
  const model = await Senti.load(positionals[0], { format: values.format });
  const texts = [];
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.length) texts.push(line.startsWith('"') ? JSON.parse(line) : line);
  }
  const answers = aspects ? await answerAspects(model, texts, aspects, { unit: values.unit, neutralMargin })
    : await model.predict(texts);
  for (const answer of answers) process.stdout.write(JSON.stringify(answer) + "\n");
} catch (err) {
  process.stderr.write(`error: ${err.message.split("\n")[0]}\n`);
  process.exit(2);
}
