// sdk.mjs runs the official Node SDKs of Anthropic, OpenAI and Google
// (Gemini) the way a user's program in an Aileron session would: keys and
// proxy from the environment the session gives (`aileron session env`),
// nothing else. Node 20's fetch ignores HTTPS_PROXY, so each SDK is given
// the proxy through its documented options: undici's fetch with a
// ProxyAgent for HTTPS_PROXY (fetch and fetchOptions.dispatcher for the
// Anthropic and OpenAI SDKs, httpOptions.fetch for @google/genai), and for
// OpenAI's Responses WebSocket ws's agent option with https-proxy-agent.
// The session CA comes from NODE_EXTRA_CA_CERTS.
//
//   node sdk.mjs NPM_DIR CASE...
//
// NPM_DIR holds node_modules with the pinned SDKs, undici, ws and
// https-proxy-agent (testdata/npm). Each CASE
// (see cases below) prints one JSON line: {"case", "text", "usage"}, where
// usage is what the SDK parsed from the answer (text is empty for token
// counts and embeddings). Any error exits non-zero.
import { createRequire } from 'node:module';
import path from 'node:path';

const [npmDir, ...names] = process.argv.slice(2);
const require = createRequire(path.join(npmDir, 'package.json'));
const { default: Anthropic } = require('@anthropic-ai/sdk');
const { default: OpenAI } = require('openai');
const { GoogleGenAI } = require('@google/genai');
const { ResponsesWS } = require('openai/resources/responses/ws');
const { HttpsProxyAgent } = require('https-proxy-agent');
const undici = require('undici');

const proxy = process.env.HTTPS_PROXY;
if (!proxy) throw new Error('HTTPS_PROXY is not set: run in `aileron session env`');
const dispatcher = new undici.ProxyAgent(proxy);
const proxied = (url, init) => undici.fetch(url, { ...init, dispatcher });
const stainless = { fetch: undici.fetch, fetchOptions: { dispatcher }, maxRetries: 0 };
const prompt = 'Say hello.';

const anthropic = (opts) => new Anthropic({ ...stainless, ...opts });
const xAPIKey = () => ({ apiKey: null, defaultHeaders: { 'X-Api-Key': process.env.ANTHROPIC_API_KEY, Authorization: null } });
const openai = () => new OpenAI(stainless);
// An OpenAI-compatible provider named llm at llm.example.com.
const compatible = () => new OpenAI({ ...stainless, apiKey: process.env.LLM_API_KEY, baseURL: 'https://llm.example.com/v1' });
const gemini = () => new GoogleGenAI({ httpOptions: { fetch: proxied } });

// Each case makes exactly one model request (the WebSocket's upgrade aside).
const cases = {
  // Authorization: Bearer, where SDK 1.x puts ANTHROPIC_API_KEY (and authToken).
  'anthropic-json': () => anthropicJSON(anthropic({})),
  'anthropic-stream': () => anthropicStream(anthropic({})),
  // x-api-key, as Claude Code and the 0.x SDKs send it: the key set by hand
  // in defaultHeaders, the SDK's documented way to choose the header.
  'anthropic-x-api-key-json': () => anthropicJSON(anthropic(xAPIKey())),
  'anthropic-x-api-key-stream': () => anthropicStream(anthropic(xAPIKey())),
  'anthropic-count-tokens': async () => {
    const r = await anthropic({}).messages.countTokens({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: prompt }] });
    return { text: '', usage: r };
  },
  'openai-responses-json': async () => {
    const r = await openai().responses.create({ model: 'gpt-5-mini', input: prompt });
    return { text: r.output_text, usage: r.usage };
  },
  'openai-responses-stream': () => responsesStream(openai()),
  // The Responses WebSocket: the SDK's ResponsesWS takes ws's options,
  // whose agent carries the proxy.
  'openai-responses-ws': async () => {
    const rws = new ResponsesWS(openai(), { agent: new HttpsProxyAgent(proxy) });
    const done = new Promise((resolve, reject) => {
      let text = '';
      rws.on('response.output_text.delta', (ev) => { text += ev.delta; });
      rws.on('response.completed', (ev) => resolve({ text, usage: ev.response.usage }));
      rws.on('error', reject);
    });
    rws.send({ type: 'response.create', model: 'gpt-5-mini', input: prompt });
    try {
      return await done;
    } finally {
      rws.close();
    }
  },
  'openai-chat-json': () => chatJSON(openai()),
  'openai-chat-stream': () => chatStream(openai()),
  // The OpenAI SDK at an OpenAI-compatible host (provider llm).
  'compatible-chat-json': () => chatJSON(compatible()),
  'compatible-chat-stream': () => chatStream(compatible()),
  'compatible-responses-stream': () => responsesStream(compatible()),
  // The SDK asks for base64 and decodes it into numbers.
  'openai-embeddings': async () => {
    const r = await openai().embeddings.create({ model: 'text-embedding-3-small', input: [prompt, prompt] });
    if (r.data.length !== 2 || !r.data.every((d) => d.embedding.length === 8 && d.embedding.every(Number.isFinite))) {
      throw new Error(`embeddings: ${JSON.stringify(r.data)}`);
    }
    return { text: '', usage: r.usage };
  },
  'gemini-json': async () => {
    const r = await gemini().models.generateContent({ model: 'gemini-2.5-flash', contents: prompt });
    return { text: r.text, usage: r.usageMetadata };
  },
  'gemini-stream': async () => {
    let text = '', usage;
    for await (const c of await gemini().models.generateContentStream({ model: 'gemini-2.5-flash', contents: prompt })) {
      text += c.text ?? '';
      usage = c.usageMetadata;
    }
    return { text, usage };
  },
  'gemini-count-tokens': async () => {
    const r = await gemini().models.countTokens({ model: 'gemini-2.5-flash', contents: prompt });
    return { text: '', usage: r };
  },
};

async function responsesStream(client) {
  const stream = client.responses.stream({ model: 'gpt-5-mini', input: prompt });
  let text = '';
  for await (const ev of stream) if (ev.type === 'response.output_text.delta') text += ev.delta;
  const r = await stream.finalResponse();
  if (r.output_text !== text) throw new Error(`streamed ${JSON.stringify(text)} but the final response says ${JSON.stringify(r.output_text)}`);
  return { text, usage: r.usage };
}

async function chatJSON(client) {
  const r = await client.chat.completions.create({ model: 'gpt-5-mini', messages: [{ role: 'user', content: prompt }] });
  return { text: r.choices[0].message.content, usage: r.usage };
}

async function chatStream(client) {
  const stream = await client.chat.completions.create({
    model: 'gpt-5-mini', messages: [{ role: 'user', content: prompt }], stream: true, stream_options: { include_usage: true },
  });
  let text = '', usage;
  for await (const c of stream) {
    if (c.choices[0]?.delta?.content) text += c.choices[0].delta.content;
    if (c.usage) usage = c.usage;
  }
  return { text, usage };
}

async function anthropicJSON(client) {
  const m = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: prompt }] });
  return { text: m.content.map((b) => b.text ?? '').join(''), usage: m.usage };
}

async function anthropicStream(client) {
  const stream = client.messages.stream({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: prompt }] });
  let text = '';
  stream.on('text', (d) => { text += d; });
  const m = await stream.finalMessage();
  return { text, usage: m.usage };
}

for (const name of names) {
  const run = cases[name];
  if (!run) throw new Error(`unknown case ${name}; known: ${Object.keys(cases).join(', ')}`);
  const out = await run();
  process.stdout.write(JSON.stringify({ case: name, ...out }) + '\n');
}
