import { createDatabase } from "../storage/postgres/database.js";
import { PostgresEvidenceStore } from "../storage/postgres/evidence.js";
import { EvidenceLog } from "../domain/evidence-log.js";
import { CliError, EXIT_OK, type CliCommand } from "./command.js";

const usage = `usage: mandate evidence-key rotate

Generates a new evidence (and capability token) signing key and makes it the
active one, in the database named by DATABASE_URL. Earlier public keys stay in
/.well-known/jwks.json, so every record signed before keeps verifying. Running
replicas pick the new key up when they next restart, and accept tokens signed
with it at once.`;

/** `mandate evidence-key rotate`: rotates the service's signing key. */
export const evidenceKeyCommand: CliCommand = {
  name: "evidence-key",
  usage,
  async run(args, io) {
    if (args.length !== 1 || args[0] !== "rotate") throw new CliError("the only subcommand is rotate", true);
    const url = process.env.DATABASE_URL;
    if (!url) throw new CliError("DATABASE_URL is not set");
    const db = createDatabase(url, 2);
    try {
      const log = await EvidenceLog.open(new PostgresEvidenceStore(db));
      const kid = await log.rotateKey();
      io.out(`active evidence key: ${kid}`);
      return EXIT_OK;
    } finally {
      await db.close();
    }
  },
};
