// The accessibility check of the inspector's browser tests (see browser.py): a function
// the page runs, returning {problems, checked}.
() => {
  const problems = [];
  const where = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.className && typeof el.className === "string" ? "." + el.className : "");
  if (!document.documentElement.lang) problems.push("the page has no language");
  if (document.querySelectorAll("h1").length !== 1) problems.push("not exactly one h1");
  if (!document.querySelector("main")) problems.push("no main landmark");
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden") continue;
    const named = (el.labels && el.labels.length) || el.getAttribute("aria-label") ||
      el.getAttribute("aria-labelledby");
    if (!named) problems.push("unlabelled control " + where(el));
  }
  for (const el of document.querySelectorAll("img")) {
    if (!el.hasAttribute("alt")) problems.push("image without alt " + where(el));
  }
  for (const el of document.querySelectorAll("table")) {
    if (!el.querySelector("th")) problems.push("table without header cells");
  }
  for (const el of document.querySelectorAll("a, button")) {
    const name = (el.textContent || "").trim() || el.getAttribute("aria-label");
    if (!name) problems.push("unnamed " + where(el));
  }
  const rgb = (text) => {
    const m = text.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(",").map((x) => parseFloat(x));
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const lum = (c) => {
    const f = (v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  let checked = 0;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || seen.has(el) || !n.textContent.trim()) continue;
    if (el.closest("svg, pre.mermaid, meter")) continue;
    seen.add(el);
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || style.display === "none") continue;
    const fg = rgb(style.color), bg = background(el);
    if (!fg) continue;
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
    const large = size >= 24 || (bold && size >= 18.66);
    checked += 1;
    if (ratio < (large ? 3 : 4.5)) {
      const text = n.textContent.trim().slice(0, 30);
      problems.push(`contrast ${ratio.toFixed(2)} of ${where(el)}: "${text}"`);
    }
  }
  return { problems, checked };
}
