// Draws the page's diagrams with the bundled Mermaid; <body data-diagrams> says when they
// are drawn ("ready") or could not be ("failed"), for people and for the browser tests.
window.addEventListener("DOMContentLoaded", function () {
  if (typeof mermaid === "undefined") {
    document.body.dataset.diagrams = "failed";
    return;
  }
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
  mermaid
    .run({ querySelector: "pre.mermaid" })
    .then(function () { document.body.dataset.diagrams = "ready"; })
    .catch(function (err) {
      document.body.dataset.diagrams = "failed";
      console.error(err);
    });
});
