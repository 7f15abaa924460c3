// Every import points down: a file imports from its own floor or a lower one, never a higher one,
// and no import cycle. The floors are written in ARCHITECTURE.md; keep the two lists in step.
// Type-only imports count as arrows too (tsPreCompilationDeps), because a type is a dependency
// of the design even when it disappears from the emitted JavaScript.

/** A router sits on the routers floor, whichever folder it is in. */
const notRouter = "(?!.*[.]router[.]ts$)";

/** Floors, bottom to top. Each entry: a name and the paths (regexes from the repo root) on it. */
const floors = [
  { name: "config", paths: ["^src/config[.]ts$", "^src/config-database-url[.]ts$"] },
  { name: "core", paths: ["^src/core/"] },
  { name: "http helpers", paths: [`^src/http/${notRouter}`] },
  { name: "db", paths: ["^src/db/"] },
  { name: "jobs, events, auth", paths: ["^src/jobs/", "^src/events/", "^src/auth/"] },
  { name: "signal-types", paths: [`^src/signal-types/${notRouter}`] },
  { name: "deps", paths: ["^src/deps[.]ts$"] },
  { name: "wait kinds", paths: ["^src/waits/kinds/"] },
  { name: "run lock", paths: ["^src/runs/run-lock[.]ts$"] },
  { name: "waits", paths: [`^src/waits/${notRouter}`] },
  { name: "signals", paths: [`^src/signals/${notRouter}`] },
  { name: "runs", paths: [`^src/runs/${notRouter}`] },
  {
    name: "job verbs",
    paths: ["^src/delivery/", "^src/notifications/", "^src/timeouts/", "^src/timers/", "^src/sensors/", "^src/retention/"],
  },
  { name: "approvals, operations", paths: [`^src/approvals/${notRouter}`, "^src/operations/"] },
  { name: "routers", paths: ["[.]router[.]ts$", "^src/console/"] },
  { name: "entrances", paths: ["^src/app[.]ts$", "^src/worker/", "^src/openapi-document[.]ts$"] },
  { name: "main", paths: ["^src/main[.]ts$"] },
];

const either = (paths) => (paths.length === 1 ? paths[0] : `(${paths.join("|")})`);
const everyFloor = either(floors.flatMap((floor) => floor.paths));

// A path can match a higher floor's pattern too (src/waits/kinds/timer-spec.ts is a wait kind,
// and also under src/waits/); it belongs to the lowest floor that names it.
const floorOf = floors.map((floor, i) => ({
  ...floor,
  pathNot: floors.slice(0, i).flatMap((lower) => lower.paths),
}));

const upwardArrows = floorOf.slice(0, -1).map((floor, i) => ({
  name: `no-up-from-${floor.name.replace(/[^a-z]+/g, "-")}`,
  comment: `The ${floor.name} floor imports only from its own floor or below (ARCHITECTURE.md, "Layers").`,
  severity: "error",
  from: { path: either(floor.paths), ...(floor.pathNot.length ? { pathNot: either(floor.pathNot) } : {}) },
  to: {
    path: either(floorOf.slice(i + 1).flatMap((higher) => higher.paths)),
    pathNot: either(floorOf.slice(0, i + 1).flatMap((sameOrLower) => sameOrLower.paths)),
  },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "An import cycle: split the shared piece out, down a floor.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-unresolvable",
      comment: "An import that resolves to nothing.",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: "routers-only-from-app",
      comment: "Nothing imports a router but app.ts (ARCHITECTURE.md, \"The shape\").",
      severity: "error",
      from: { pathNot: "^src/app[.]ts$" },
      to: { path: "[.]router[.]ts$" },
    },
    {
      name: "every-file-on-a-floor",
      comment: "A file under src/ that no floor names: add its folder to `floors` here and in ARCHITECTURE.md.",
      severity: "error",
      from: { path: "^src/", pathNot: everyFloor },
      to: {},
    },
    {
      name: "imports-only-files-on-a-floor",
      comment: "An import of a file under src/ that no floor names: add its folder to `floors` here and in ARCHITECTURE.md.",
      severity: "error",
      from: {},
      to: { path: "^src/", pathNot: everyFloor },
    },
    ...upwardArrows,
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".js", ".json"],
    },
  },
};
