-- Relationship tuples of the in-process authorization evaluator (MOWDECK_AUTHZ=local).
CREATE TABLE authz_tuples (
    object_type text        NOT NULL,
    object_id   text        NOT NULL,
    relation    text        NOT NULL,
    subject     text        NOT NULL,  -- the tuple's user: type:id, type:* or type:id#relation
    is_userset  boolean     GENERATED ALWAYS AS (strpos(subject, '#') > 0) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (object_type, object_id, relation, subject)
);

-- Reverse evaluation (list_objects): objects of a type whose relation holds given subjects.
CREATE INDEX authz_tuples_reverse ON authz_tuples (object_type, relation, subject);
-- Reads by user.
CREATE INDEX authz_tuples_subject ON authz_tuples (subject);
-- Forward checks follow usersets without scanning the plain users of a relation.
CREATE INDEX authz_tuples_usersets ON authz_tuples (object_type, object_id, relation)
    WHERE is_userset;
