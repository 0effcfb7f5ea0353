CREATE TABLE {steps} (
    call       bytea NOT NULL,
    step       bytea NOT NULL,
    value      bytea NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (call, step)
);
COMMENT ON TABLE {steps} IS 'idem: the finished steps (recovery points) of calls, kept across a release of the claim.';
CREATE INDEX {steps_index} ON {steps} (expires_at);
CREATE FUNCTION {steps_of}(p_key bytea) RETURNS bytea[]
LANGUAGE plpgsql VOLATILE AS $idem$
BEGIN
    RETURN (SELECT array_agg(s.step || s.value) FROM {steps} AS s
            WHERE s.call = p_key AND s.expires_at > statement_timestamp());
END
$idem$;
