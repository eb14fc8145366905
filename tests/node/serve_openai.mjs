// serve_openai.mjs - drives fgpack serve with the official openai npm client.
// Usage: node serve_openai.mjs BASE_URL [BUNDLE_ID] ; prints TAP-style "ok"/"not ok"
// lines. With BUNDLE_ID, every response must carry it as system_fingerprint.
import OpenAI from "openai";

const base = process.argv[2];
const bundleId = process.argv[3];
const client = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 0 });
let n = 0, failed = 0;
const ok = (cond, name, extra) => {
	n++;
	if (!cond) failed++;
	console.log(`${cond ? "" : "not "}ok ${n} - openai: ${name}`);
	if (!cond && extra !== undefined) console.log("#   " + JSON.stringify(extra).slice(0, 400));
};

try {
	const models = await client.models.list();
	const ids = [];
	for await (const m of models) ids.push(m.id);
	ok(ids.length === 1, "models.list gives the served model", ids);

	const msgs = [{ role: "system", content: "You are terse." }, { role: "user", content: "hello abc" }];
	const chat = await client.chat.completions.create({ model: ids[0], messages: msgs, max_tokens: 12 });
	const c0 = chat.choices[0];
	ok(chat.object === "chat.completion" && c0.message.role === "assistant", "chat: object and role", chat);
	ok(typeof c0.message.content === "string" && ["stop", "length"].includes(c0.finish_reason), "chat: content and finish_reason", c0);
	ok(chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 12 && chat.usage.prompt_tokens > 5, "chat: usage counts", chat.usage);

	const again = await client.chat.completions.create({ model: ids[0], messages: msgs, max_tokens: 12 });
	ok(again.choices[0].message.content === c0.message.content, "chat: greedy, same answer twice");
	if (bundleId)
		ok(chat.system_fingerprint === bundleId, "chat: system_fingerprint is the bundle id", chat.system_fingerprint);

	const stream = await client.chat.completions.create({ model: ids[0], messages: msgs, max_tokens: 12, stream: true });
	let text = "", finish = null, chunks = 0, role = null, fp = 0;
	for await (const ch of stream) {
		chunks++;
		if (ch.system_fingerprint === bundleId) fp++;
		const d = ch.choices[0].delta;
		if (d.role) role = d.role;
		if (d.content) text += d.content;
		if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
	}
	ok(role === "assistant" && chunks >= 2, "chat stream: role chunk then content chunks", { role, chunks });
	ok(text === c0.message.content, "chat stream: concatenated deltas equal the non-stream answer", { text, want: c0.message.content });
	ok(finish === c0.finish_reason, "chat stream: same finish_reason", { finish });
	if (bundleId)
		ok(fp === chunks, "chat stream: every chunk's system_fingerprint is the bundle id", { fp, chunks });

	// stream_options.include_usage: the counts come in a last chunk with no choices
	const su = await client.chat.completions.create({ model: ids[0], messages: msgs, max_tokens: 12, stream: true, stream_options: { include_usage: true } });
	let utext = "", usage = null, empty = 0, nulls = 0, uchunks = 0;
	for await (const ch of su) {
		uchunks++;
		if (ch.choices.length === 0) { empty++; usage = ch.usage; continue; }
		if (ch.usage === null) nulls++;
		if (ch.choices[0].delta.content) utext += ch.choices[0].delta.content;
	}
	ok(empty === 1 && nulls === uchunks - 1 && usage && usage.completion_tokens === chat.usage.completion_tokens &&
	   usage.prompt_tokens === chat.usage.prompt_tokens && utext === c0.message.content,
	   "chat stream with include_usage: one last chunk of usage, the same counts and text", { empty, nulls, uchunks, usage });

	const comp = await client.completions.create({ model: ids[0], prompt: "hello", max_tokens: 7 });
	ok(comp.object === "text_completion" && typeof comp.choices[0].text === "string", "completions: text", comp);
	ok(comp.usage.completion_tokens <= 7, "completions: max_tokens respected", comp.usage);
	if (bundleId)
		ok(comp.system_fingerprint === bundleId, "completions: system_fingerprint is the bundle id", comp.system_fingerprint);

	const cs = await client.completions.create({ model: ids[0], prompt: "hello", max_tokens: 7, stream: true });
	let ctext = "";
	for await (const ch of cs) ctext += ch.choices[0].text;
	ok(ctext === comp.choices[0].text, "completions stream: equals non-stream", { ctext, want: comp.choices[0].text });

	const ids_prompt = await client.completions.create({ model: ids[0], prompt: [2, 270, 271, 272], max_tokens: 5 });
	ok(ids_prompt.usage.prompt_tokens === 4, "completions: prompt as token ids", ids_prompt.usage);

	let err = null;
	try {
		await client.chat.completions.create({ model: ids[0], messages: [{ role: "wizard", content: "x" }] });
	} catch (e) {
		err = e;
	}
	ok(err && err.status === 400 && /role/.test(err.message), "bad role: 400 surfaced as an APIError", err && err.message);

	err = null;
	try {
		await client.chat.completions.create({ model: ids[0], messages: msgs, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }] });
	} catch (e) {
		err = e;
	}
	ok(err && err.status === 400 && /tool calling is not supported/.test(err.message), "tools: refused with 400, not ignored", err && err.message);
} catch (e) {
	ok(false, "unexpected exception", String(e && e.stack || e));
}
console.log(`${n - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
