// The console's only script, and a progressive one: every page works without it. It streams
// a run's new history entries into its timeline (the run page's own SSE feed, same origin) and
// adds copy buttons to examples. DOM text only (textContent), never HTML from data.
"use strict";

function whenText(iso) {
  return iso.replace("T", " ").replace(/\.\d{3}Z$/, " UTC");
}

function eventItem(event) {
  const li = document.createElement("li");
  li.id = event.id;
  li.className = "new";
  const type = document.createElement("span");
  type.className = "etype";
  type.textContent = event.type;
  const time = document.createElement("time");
  time.dateTime = event.occurred_at;
  time.textContent = whenText(event.occurred_at);
  li.append(type, " ", time);
  if (event.wait_id) {
    const wait = document.createElement("span");
    wait.className = "sub";
    wait.textContent = event.wait_id;
    li.append(" ", wait);
  }
  if (event.data && Object.keys(event.data).length > 0) {
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "data";
    const pre = document.createElement("pre");
    pre.className = "json";
    pre.textContent = JSON.stringify(event.data, null, 2);
    details.append(summary, pre);
    li.append(details);
  }
  return li;
}

function streamTimeline() {
  const timeline = document.getElementById("timeline");
  if (!timeline || !timeline.dataset.stream || typeof EventSource === "undefined") return;
  const status = document.getElementById("live-status");
  const say = (text) => {
    if (status) status.textContent = text;
  };
  const source = new EventSource(timeline.dataset.stream);
  source.onopen = () => say("Live: new events appear here as they happen.");
  source.onerror = () => say("Connection lost; reconnecting…");
  source.onmessage = (message) => {
    const event = JSON.parse(message.data);
    if (document.getElementById(event.id)) return; // already shown
    document.getElementById("timeline-empty")?.remove();
    timeline.append(eventItem(event));
  };
}

function copyButtons() {
  for (const pre of document.querySelectorAll("pre[data-copy]")) {
    if (!navigator.clipboard) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy-button";
    button.textContent = "Copy";
    button.addEventListener("click", async () => {
      await navigator.clipboard.writeText(pre.textContent ?? "");
      button.textContent = "Copied";
    });
    pre.after(button);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  streamTimeline();
  copyButtons();
});
