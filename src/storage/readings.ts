/**
 * Figures read at each metrics scrape (GET /metrics): cheap, bounded queries over indexes that
 * exist for the hot paths, so a scrape never scans a table. Each rejects with a storage error
 * when the database cannot answer; the scrape then omits that figure.
 */
export interface OperationalReadings {
  /** HUMAN_REVIEW decisions still PENDING, over every organization (the partial index on pending decisions). */
  pendingReviews(): Promise<number>;
  /**
   * Seconds the most overdue pending webhook delivery of a webhook not deleted has been due (its
   * next attempt's time passed); 0 when none is overdue. Read from the index of due deliveries.
   */
  webhookDeliveryLagSeconds(): Promise<number>;
}
