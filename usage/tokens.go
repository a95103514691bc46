package usage

import "encoding/json"

// Tokens are the counts a provider reported for one call or turn. A count
// the provider did not report is zero.
type Tokens struct {
	Input, Output, Cached int64
}

// The dialects, as policy.OperationSpec.Usage names them.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// usagePaths are where each dialect's answers (or their stream events)
// carry a usage object: top-level, or inside the message (Anthropic's
// message_start) or the response (OpenAI Responses' events).
func usagePaths(api string) []string {
	switch api {
	case Anthropic:
		return []string{"usage", "message.usage"}
	case OpenAI:
		return []string{"usage", "response.usage"}
	case Gemini:
		return []string{"usageMetadata"}
	}
	return nil
}

// counts are the fields of every dialect's usage object; nil means not
// reported, so that a later report replaces only what it carries.
type counts struct {
	// anthropic
	InputTokens  *int64 `json:"input_tokens"` // also OpenAI Responses
	OutputTokens *int64 `json:"output_tokens"`
	CacheRead    *int64 `json:"cache_read_input_tokens"`
	// openai
	PromptTokens     *int64  `json:"prompt_tokens"`
	CompletionTokens *int64  `json:"completion_tokens"`
	PromptDetails    *cached `json:"prompt_tokens_details"`
	InputDetails     *cached `json:"input_tokens_details"`
	// gemini
	PromptCount     *int64 `json:"promptTokenCount"`
	CandidatesCount *int64 `json:"candidatesTokenCount"`
	ThoughtsCount   *int64 `json:"thoughtsTokenCount"`
	CachedCount     *int64 `json:"cachedContentTokenCount"`
}

type cached struct {
	CachedTokens *int64 `json:"cached_tokens"`
}

// merge applies one usage object (raw JSON) of dialect api onto t: each
// count it reports replaces t's. It reports whether raw was a usage
// object at all.
// maxCount bounds each count an answer reports (2^53, the largest a
// budget may be): an upstream's absurd number saturates, and sums of two
// never wrap.
const maxCount = int64(1) << 53

func (t *Tokens) merge(api string, raw []byte) bool {
	var c counts
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &c) != nil {
		return false
	}
	set := func(dst *int64, v *int64) {
		if v != nil && *v >= 0 {
			*dst = min(*v, maxCount)
		}
	}
	switch api {
	case Anthropic:
		set(&t.Input, c.InputTokens)
		set(&t.Output, c.OutputTokens)
		set(&t.Cached, c.CacheRead)
	case OpenAI:
		set(&t.Input, c.PromptTokens)
		set(&t.Input, c.InputTokens)
		set(&t.Output, c.CompletionTokens)
		set(&t.Output, c.OutputTokens)
		if c.PromptDetails != nil {
			set(&t.Cached, c.PromptDetails.CachedTokens)
		}
		if c.InputDetails != nil {
			set(&t.Cached, c.InputDetails.CachedTokens)
		}
	case Gemini:
		set(&t.Input, c.PromptCount)
		if c.CandidatesCount != nil || c.ThoughtsCount != nil {
			var out int64
			for _, v := range []*int64{c.CandidatesCount, c.ThoughtsCount} {
				if v != nil && *v > 0 {
					out += min(*v, maxCount)
				}
			}
			t.Output = min(out, maxCount)
		}
		set(&t.Cached, c.CachedCount)
	}
	return true
}
