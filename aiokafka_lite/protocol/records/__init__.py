"""Record sets as the broker sends them: RecordBatch v2, legacy message sets, columns, encoding."""
