package fakeresponses

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// stream writes reply as the Responses API's event stream.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, model string, rep reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	seq := 0
	send := func(data map[string]any) {
		data["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if fl != nil {
			fl.Flush()
		}
	}
	first := s.ids(len(rep.items) + 1)
	respID := fmt.Sprintf("resp_fake%04d", first)
	resp := map[string]any{"id": respID, "object": "response", "model": model, "status": "in_progress", "output": []any{}}
	send(map[string]any{"type": "response.created", "response": resp})
	send(map[string]any{"type": "response.in_progress", "response": resp})
	var output []any
	for i, it := range rep.items {
		n := first + 1 + i
		done, ok := s.streamItem(ctx, send, i, n, it)
		if !ok {
			return
		}
		output = append(output, done)
	}
	u := rep.usage
	completed := map[string]any{"id": respID, "object": "response", "model": model, "status": "completed", "output": output,
		"usage": map[string]any{
			"input_tokens":          u.Input,
			"input_tokens_details":  map[string]any{"cached_tokens": u.Cached},
			"output_tokens":         u.Output,
			"output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
			"total_tokens":          u.Input + u.Output,
		}}
	send(map[string]any{"type": "response.completed", "response": completed})
}

// streamItem streams one output item (index i, id number n) and returns it
// as done; false if the request ended first.
func (s *Server) streamItem(ctx context.Context, send func(map[string]any), i, n int, it item) (map[string]any, bool) {
	switch it.kind {
	case "reasoning":
		id := fmt.Sprintf("rs_fake%04d", n)
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}})
		part := map[string]any{"type": "summary_text", "text": ""}
		send(map[string]any{"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": i, "summary_index": 0, "part": part})
		for _, d := range halves(it.text) {
			send(map[string]any{"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": i, "summary_index": 0, "delta": d})
		}
		send(map[string]any{"type": "response.reasoning_summary_text.done", "item_id": id, "output_index": i, "summary_index": 0, "text": it.text})
		full := map[string]any{"type": "summary_text", "text": it.text}
		send(map[string]any{"type": "response.reasoning_summary_part.done", "item_id": id, "output_index": i, "summary_index": 0, "part": full})
		done := map[string]any{"type": "reasoning", "id": id, "summary": []any{full}, "encrypted_content": nil}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": done})
		return done, true
	case "message":
		id := fmt.Sprintf("msg_fake%04d", n)
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
		send(map[string]any{"type": "response.content_part.added", "item_id": id, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		pieces := halves(it.text)
		if it.slow {
			pieces = words(it.text)
		}
		for j, d := range pieces {
			if it.slow && j == SlowTextBeforePause && !s.pause(ctx) {
				return nil, false
			}
			send(map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": i, "content_index": 0, "delta": d})
		}
		if ctx.Err() != nil {
			return nil, false
		}
		part := map[string]any{"type": "output_text", "text": it.text, "annotations": []any{}}
		send(map[string]any{"type": "response.output_text.done", "item_id": id, "output_index": i, "content_index": 0, "text": it.text})
		send(map[string]any{"type": "response.content_part.done", "item_id": id, "output_index": i, "content_index": 0, "part": part})
		done := map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed", "content": []any{part}}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": done})
		return done, true
	case "function_call":
		id, callID := fmt.Sprintf("fc_fake%04d", n), fmt.Sprintf("call_fake%04d", n)
		args, _ := json.Marshal(it.args)
		added := map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": it.name, "arguments": "", "status": "in_progress"}
		if it.namespace != "" {
			added["namespace"] = it.namespace
		}
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added})
		for _, d := range halves(string(args)) {
			send(map[string]any{"type": "response.function_call_arguments.delta", "item_id": id, "output_index": i, "delta": d})
		}
		send(map[string]any{"type": "response.function_call_arguments.done", "item_id": id, "output_index": i, "arguments": string(args)})
		done := map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": it.name, "arguments": string(args), "status": "completed"}
		if it.namespace != "" {
			done["namespace"] = it.namespace
		}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": done})
		return done, true
	default: // custom_tool_call
		id, callID := fmt.Sprintf("ctc_fake%04d", n), fmt.Sprintf("call_fake%04d", n)
		send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": map[string]any{"type": "custom_tool_call", "id": id, "call_id": callID, "name": it.name, "input": "", "status": "in_progress"}})
		for _, d := range halves(it.text) {
			send(map[string]any{"type": "response.custom_tool_call_input.delta", "item_id": id, "output_index": i, "delta": d})
		}
		send(map[string]any{"type": "response.custom_tool_call_input.done", "item_id": id, "output_index": i, "input": it.text})
		done := map[string]any{"type": "custom_tool_call", "id": id, "call_id": callID, "name": it.name, "input": it.text, "status": "completed"}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": done})
		return done, true
	}
}

// words splits s after each space, keeping the spaces.
func words(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// halves splits s in two pieces on a rune boundary (one piece if short).
func halves(s string) []string {
	r := []rune(s)
	if len(r) < 2 {
		return []string{s}
	}
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
}
