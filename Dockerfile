# syntax=docker/dockerfile:1
# Mandate's container image: opa built from source in a Go stage (as scripts/setup.sh builds it,
# never a downloaded binary), the console built in a Node stage, and a runtime stage that runs
# as the unprivileged `node` user. Not built on the machine this was written on (no container
# engine there): test/unit/deployment.test.ts checks that every file it names exists.
# See docs/deployment.md.

ARG NODE_IMAGE=node:20-bookworm-slim
ARG GO_IMAGE=golang:1.24-bookworm
# Keep equal to OPA_VERSION in scripts/setup.sh (the deployment test checks it).
ARG OPA_VERSION=v1.22.3

# --- opa: the policy compiler, from the Go module proxy at the pinned version ----------------
FROM ${GO_IMAGE} AS opa
ARG OPA_VERSION
RUN GOBIN=/out GOFLAGS=-mod=mod CGO_ENABLED=0 go install "github.com/open-policy-agent/opa@${OPA_VERSION}" \
 && /out/opa version

# --- build: dependencies from the lockfile, the service (dist/) and the console, then production dependencies only
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Install scripts stay off except embedded-postgres's platform package, as package.json's
# allowScripts says; the image never starts an embedded Postgres (DATABASE_URL is required).
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY policies ./policies
COPY src ./src
COPY clients ./clients
COPY console ./console
RUN npm run build \
 && npm run build:console \
 && npm prune --omit=dev

# --- runtime ------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    MANDATE_OPA_PATH=/usr/local/bin/opa
WORKDIR /app
COPY --from=opa /out/opa /usr/local/bin/opa
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/policies ./policies
COPY --from=build /app/console/dist ./console/dist
# Read-only for the service: it writes nothing to its own directory (no data dir is used when
# DATABASE_URL is set; policy bundles are built in the OS temp directory).
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# What `npm start` runs: the compiled CLI's `serve`, which starts dist/main.js with the service's
# node flags and passes SIGTERM on.
CMD ["node", "dist/cli/main.js", "serve"]
