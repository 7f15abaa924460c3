/**
 * What the API accepts for a run id and a signal name (API.md, Conventions): the API's schemas
 * (src/http/openapi.ts) and the console's forms check the same patterns. A run id is a path
 * segment, so not `.` nor `..`: a URL's dot segments, which every client resolves away.
 */
export const RUN_ID = /^(?!\.\.?$)[A-Za-z0-9._:@-]{1,200}$/;
export const SIGNAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
