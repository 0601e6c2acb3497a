package push

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// Ntfy posts to an ntfy topic (https://ntfy.sh or a server of one's own):
// for people whose relay has no HTTPS, where browsers refuse Web Push. A
// message is a short fixed text and a link, never a session's content.
type Ntfy struct {
	topic string
	q     *queue
}

// NewNtfy returns a sender to the topic URL (http or https). A nil client
// gets one with SendTimeout that follows no redirect.
func NewNtfy(topic string, client *http.Client, log *slog.Logger) (*Ntfy, error) {
	u, err := url.Parse(topic)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("ntfy topic %q: want http(s)://server/topic", topic)
	}
	return &Ntfy{topic: topic, q: newQueue(client, log)}, nil
}

// Run delivers queued messages until ctx ends.
func (n *Ntfy) Run(ctx context.Context) { n.q.run(ctx) }

// Send queues a post of text with a link to click (never blocking;
// ErrQueueFull when MaxQueue wait). Text goes in the body, the link in the
// Click header.
func (n *Ntfy) Send(title, text, link string) error {
	return n.q.add(&job{what: "ntfy", do: func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, n.topic, strings.NewReader(text))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		if title != "" {
			req.Header.Set("Title", title)
		}
		if link != "" {
			req.Header.Set("Click", link)
		}
		return req, nil
	}})
}
