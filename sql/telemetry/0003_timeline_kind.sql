-- The kind of command a timeline row belongs to (results carry it since contracts v1.1;
-- rows written before, and results of older gateways, leave it NULL).
ALTER TABLE command_timeline ADD COLUMN kind text;
