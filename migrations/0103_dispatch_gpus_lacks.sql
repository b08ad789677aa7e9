-- A GPU of the default catalogue whose backend has no credentials is announced too, with what it lacks
-- (`kernelbot runners`); NULL for a GPU the dispatcher serves.
ALTER TABLE dispatch_gpus ADD COLUMN lacks TEXT;
