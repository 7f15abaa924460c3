// Regenerates openapi/openapi.json from the route contracts (`npm run openapi`).
import fs from "node:fs";
import { openApiText } from "../src/openapi-document.ts";

fs.writeFileSync(new URL("../openapi/openapi.json", import.meta.url), openApiText());
console.log("wrote openapi/openapi.json");
