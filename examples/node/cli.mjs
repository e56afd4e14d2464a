#!/usr/bin/env node
// node cli.mjs EXPORT_DIR [--format onnx] < texts.jsonl  ->  one JSON answer per input line (a JSON string or text)
import { createInterface } from "node:readline";
import { Senti } from "./senti.mjs";

const [folder, ...rest] = process.argv.slice(2);
const format = rest[0] === "--format" ? rest[1] : "onnx";
try {
  const model = await Senti.load(folder, { format });
  const texts = [];
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.length) texts.push(line.startsWith('"') ? JSON.parse(line) : line);
  }
  for (const answer of await model.predict(texts)) process.stdout.write(JSON.stringify(answer) + "\n");
} catch (err) {
  process.stderr.write(`error: ${err.message.split("\n")[0]}\n`);
  process.exit(2);
}
