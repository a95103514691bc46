// Package usage owns reading model names and token counts from model API
// requests and answers: a JSON answer, the usage events of an SSE stream,
// and the turns of an OpenAI Responses WebSocket. It reads bytes as they
// pass and never holds or changes them: memory per answer or connection is
// bounded and does not grow with its size, and no prompt or completion
// text is kept.
//
// The dialects are those of policy.OperationSpec.Usage: "anthropic",
// "openai" and "gemini". Tokens are the provider's own counts:
//
//   - anthropic: usage.input_tokens, usage.output_tokens and
//     usage.cache_read_input_tokens (in a stream: message_start's
//     message.usage, then each message_delta's cumulative usage);
//   - openai: usage.prompt_tokens or input_tokens, completion_tokens or
//     output_tokens, and prompt_tokens_details or input_tokens_details
//     .cached_tokens (chat completions' last chunk with stream_options
//     include_usage; Responses' response.usage in response.completed,
//     response.failed or response.incomplete);
//   - gemini: usageMetadata.promptTokenCount, candidatesTokenCount plus
//     thoughtsTokenCount (the thinking tokens, billed as output, are
//     counted as output) and cachedContentTokenCount.
//
// Where a stream reports usage more than once, a count reported later
// replaces the earlier one (the providers report running totals).
package usage
