package main

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
)

// click survives an element drawn anew between chromedp finding it and
// clicking it, as the app draws its list and a session again on changes;
// chromedp.Click alone then fails ("Could not find node with given id").
func TestClickRedrawnElement(t *testing.T) {
	ctx := newBrowser(t)
	const page = `<!doctype html><body><script>
window.clicks = 0;
function draw() {
  const b = document.createElement('button');
  b.id = 'b'; b.textContent = 'tap'; b.style.cssText = 'width:200px;height:200px';
  b.onmousedown = () => window.clicks++; // a press: a click needs press and release on one node
  document.getElementById('b')?.remove();
  document.body.append(b);
}
draw();
setInterval(draw, 5);
</script></body>`
	must(t, ctx, chromedp.Navigate("data:text/html,"+url.PathEscape(page)))
	const n = 30
	for range n {
		click(t, ctx, "#b")
	}
	waitJS(t, ctx, "every press counted", `window.clicks === 30`)
}
