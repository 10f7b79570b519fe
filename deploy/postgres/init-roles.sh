#!/bin/sh
# Runs once, when the Postgres container initialises an empty data directory
# (/docker-entrypoint-initdb.d). The two roles of README "External Postgres": an owner that
# owns the schema and runs migrations, and a service role that owns nothing.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<SQL
CREATE ROLE mandate_owner LOGIN PASSWORD '${MANDATE_OWNER_PASSWORD}';
CREATE ROLE mandate_service LOGIN PASSWORD '${MANDATE_SERVICE_PASSWORD}';
CREATE DATABASE mandate OWNER mandate_owner;
SQL
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname mandate -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC;"
