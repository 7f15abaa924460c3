# syntax=docker/dockerfile:1
# signalbox container image: `docker build -t signalbox .`
# Runs with an external Postgres (DATABASE_URL is required: the embedded Postgres of `npm start`
# is an optional dependency and is not installed here). See docker-compose.yml.

# Stage 1: the whole project with its dev dependencies. `npm run lint` (tsc --noEmit and the
# layer check) is the build check; only the checked sources leave this stage.
FROM node:24-slim AS build
WORKDIR /app
# patches/ first: npm ci's postinstall (patch-package) applies them to node_modules. The
# workspace's package.json too: without it npm ci skips the client's dev dependencies, which the
# lint below type-checks.
COPY package.json package-lock.json ./
COPY packages/client/package.json ./packages/client/
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run lint

# Stage 2: the runtime. Production dependencies only; Node runs the TypeScript sources directly
# (type stripping), so there is no compiled output to copy. The client workspace (packages/) is
# not part of the service: npm ci skips it here.
FROM node:24-slim AS runtime
ENV NODE_ENV=production \
    PORT=8080 \
    SIGNALBOX_DATA_DIR=/var/lib/signalbox
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# Install scripts stay off; our own patches (patch-package, see patches/) are applied explicitly.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund \
 && npx --no-install patch-package \
 && npm cache clean --force \
 && mkdir -p /var/lib/signalbox \
 && chown node:node /var/lib/signalbox
# Copied from the build stage rather than the context: BuildKit builds only the stages the
# target needs, so these lines are also what makes the lint check run.
COPY --from=build /app/src ./src
COPY --from=build /app/db ./db
COPY --from=build /app/openapi ./openapi
USER node
EXPOSE 8080
# No curl in the slim image: Node's fetch does the probe.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# SIGTERM: stop accepting, answer requests in flight, let running jobs finish, exit within 10 s.
STOPSIGNAL SIGTERM
CMD ["node", "src/main.ts"]
