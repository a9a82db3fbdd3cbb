// The recipe page while its recipe runs: every few seconds the pipeline (drawn and escaped by the server,
// runs/recipes/templates/recipes/pipeline.html) is fetched and swapped in, so each stage's status, links and figures
// follow the stages as they progress. When the recipe stops, the page reloads for the buttons that fit its new status.

import { getJSON } from "./dom.js";

const card = document.getElementById("recipe");
const url = `/recipes/${card.dataset.recipe}/pipeline.json`;
const EVERY_MS = 2000;

async function refresh() {
  let data;
  try {
    data = await getJSON(url);
  } catch (e) {
    return setTimeout(refresh, EVERY_MS * 2); // a server restart or a dropped connection: try again later
  }
  if (data.status !== card.dataset.status) return window.location.reload();
  const drawn = document.getElementById("pipeline");
  const fresh = new DOMParser().parseFromString(data.html, "text/html").getElementById("pipeline");
  if (fresh && fresh.outerHTML !== drawn.outerHTML) drawn.replaceWith(document.adoptNode(fresh));
  setTimeout(refresh, EVERY_MS);
}

setTimeout(refresh, EVERY_MS);
