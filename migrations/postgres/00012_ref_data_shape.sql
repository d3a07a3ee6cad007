-- +goose Up
-- ref_data contract version 2 (R-C10 as amended, C-31): every field of a
-- reference document has one JSON shape, whatever the data. Version 1 wrote
-- an element that occurred once as a scalar or object and the same element
-- repeated as an array, and an attribute-only element with all attributes
-- empty as an object of nulls. Version 2 (docs/message-types.md):
--   * a field the catalogue marks repeatable (ABDG STND/GATE, AIRL
--     TRML/OGRP/SUBC, ARPT/CITY ABBR, COUL REGC, ORGN OCAT) is an array,
--     even with one member, or null when no member has a value;
--   * members of AIRL TRML and ARPT/CITY ABBR carry every declared
--     attribute and "#text", members of AIRL SUBC every declared child,
--     each a string or null; a member with all of them null is dropped;
--   * every other catalogue field is a string or null;
--   * elements the catalogue does not list for the type, and (in stored
--     version-1 rows only) values that fit no version-2 shape, are kept as
--     sent under "VERBATIM": element name -> array of its values (null when
--     none has a value).
-- The version-2 shape is a pure function of the version-1 document and the
-- catalogue schema, so it is re-derived here in SQL; no raw message is
-- needed (proc_state rows are cleaned up after record-retention anyway).
CREATE TEMPORARY TABLE ref_v2_field (type text, field text, kind text, parts text[]) ON COMMIT DROP;
INSERT INTO ref_v2_field (type, field, kind, parts)
SELECT t.type, f.field, 'text', NULL FROM (VALUES
    ('ABDG', ARRAY['ABCD','DESC','CDSC','AHGT','ATML','ATHE','AMNO']),
    ('ABNR', ARRAY['ANRC','ANRD','ARDC']),
    ('AIRC', ARRAY['ITAT','ICAT','DESC','CDSC','CHAP','MAXP','MFWT','MTWT','ALEN','WSPN','MHTM','MABR']),
    ('AIRL', ARRAY['ITOP','ICOP','ONAM','ONMC','CTRY','DORI']),
    ('ARPT', ARRAY['ITCD','ICCD','ANAM','ANMC','BDIS','CTRY','ACTY','ATYP','HAUL']),
    ('BLST', ARRAY['BCOD','BTNM','BNMC','BCAT','BTML']),
    ('CHLT', ARRAY['CCOD','CHNM','CNMC','CTML','CCAT']),
    ('CITY', ARRAY['ITCD','ICCD','CNAM','CNMC','CTRY']),
    ('CLST', ARRAY['CCOD','CTNM','CNMC','CCAT','CTML','CTRA']),
    ('COUL', ARRAY['COUC','COUN','CNMC']),
    ('DLYL', ARRAY['DCOD','DCDN','DDES','DDSC']),
    ('FLTL', ARRAY['FTYP','CTYP','FDES','FDSC','FCML']),
    ('GLST', ARRAY['GCOD','GTNM','GNMC','GCAT','GTML','PIER']),
    ('HLTR', ARRAY['HLTC','HLTD','HTDC','HLTT','UMNM']),
    ('ORGN', ARRAY['OGID','ONAM','ONMC']),
    ('PLST', ARRAY['PCOD','PRNM','PNMC','PCAT','PTML']),
    ('REGL', ARRAY['REGC','REGN','RGNC']),
    ('REGN', ARRAY['RNUM','ITAT','OWID','ACAL','ALSC','MAXP','MFWT','MTWT']),
    ('SLST', ARRAY['SCOD','STNM','SNMC','SATC','STGP','SWID','SHGT','STML','MABS','DIGT','DDGT','REMT','FEPU']),
    ('STTS', ARRAY['STTC','STTD','STDC','ABNS']),
    ('TLST', ARRAY['TCOD','TNAM','TNMC','TCAT','TPAX']),
    ('VIPL', ARRAY['VPCD','VPNC','VFNM','VLNM','VDES','VDSC','VPON','VRNK','VPTC','VCTN','VCMN','VRMK','VPWU','VPPS']),
    ('VIPS', ARRAY['VSCD','VSDS','VSDC','VSQC','VSUC'])
) AS t(type, fields), unnest(t.fields) AS f(field);
INSERT INTO ref_v2_field (type, field, kind, parts) VALUES
    ('ABDG', 'STND', 'textlist', NULL),
    ('ABDG', 'GATE', 'textlist', NULL),
    ('AIRL', 'TRML', 'attrlist', ARRAY['MVIN','FLIN']),
    ('AIRL', 'OGRP', 'textlist', NULL),
    ('AIRL', 'SUBC', 'recordlist', ARRAY['CODE','NAME','NAMC']),
    ('ARPT', 'ABBR', 'attrlist', ARRAY['CODE']),
    ('CITY', 'ABBR', 'attrlist', ARRAY['CODE']),
    ('COUL', 'REGC', 'textlist', NULL),
    ('ORGN', 'OCAT', 'textlist', NULL);

-- +goose StatementBegin
CREATE FUNCTION pg_temp.ref_v2_wrap(v jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'null' THEN v WHEN 'array' THEN v ELSE jsonb_build_array(v) END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION pg_temp.ref_v2_doc(typ text, doc jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    result jsonb := '{}';
    extra  jsonb := '{}';
    k      text;
    v      jsonb;
    f      record;
    member jsonb;
    arr    jsonb;
    m      jsonb;
    p      text;
    fits   boolean;
BEGIN
    FOR k, v IN SELECT e.key, e.value FROM jsonb_each(doc) AS e LOOP
        SELECT * INTO f FROM ref_v2_field WHERE ref_v2_field.type = typ AND ref_v2_field.field = k;
        IF NOT FOUND THEN
            extra := extra || jsonb_build_object(k, pg_temp.ref_v2_wrap(v));
            CONTINUE;
        END IF;
        IF f.kind = 'text' THEN
            IF jsonb_typeof(v) IN ('string', 'null') THEN
                result := result || jsonb_build_object(k, v);
            ELSE
                extra := extra || jsonb_build_object(k, pg_temp.ref_v2_wrap(v));
            END IF;
            CONTINUE;
        END IF;
        IF jsonb_typeof(v) = 'null' THEN
            result := result || jsonb_build_object(k, v);
            CONTINUE;
        END IF;
        v := pg_temp.ref_v2_wrap(v);
        arr := '[]';
        fits := true;
        FOR member IN SELECT a.value FROM jsonb_array_elements(v) AS a LOOP
            CONTINUE WHEN jsonb_typeof(member) = 'null';
            IF f.kind = 'textlist' THEN
                IF jsonb_typeof(member) <> 'string' THEN fits := false; EXIT; END IF;
                arr := arr || jsonb_build_array(member);
                CONTINUE;
            END IF;
            IF f.kind = 'attrlist' AND jsonb_typeof(member) = 'string' THEN
                member := jsonb_build_object('#text', member); -- an element without attributes
            END IF;
            IF jsonb_typeof(member) <> 'object'
               OR EXISTS (SELECT 1 FROM jsonb_each(member) AS e WHERE jsonb_typeof(e.value) NOT IN ('string', 'null')) THEN
                fits := false; EXIT;
            END IF;
            IF f.kind = 'attrlist' THEN
                IF EXISTS (SELECT 1 FROM jsonb_object_keys(member) AS mk
                           WHERE mk <> '#text' AND NOT (left(mk, 1) = '@' AND substr(mk, 2) = ANY (f.parts))) THEN
                    fits := false; EXIT;
                END IF;
                m := jsonb_build_object('#text', COALESCE(member -> '#text', 'null'::jsonb));
                FOREACH p IN ARRAY f.parts LOOP
                    m := m || jsonb_build_object('@' || p, COALESCE(member -> ('@' || p), 'null'::jsonb));
                END LOOP;
            ELSE
                IF EXISTS (SELECT 1 FROM jsonb_object_keys(member) AS mk WHERE NOT (mk = ANY (f.parts))) THEN
                    fits := false; EXIT;
                END IF;
                m := '{}';
                FOREACH p IN ARRAY f.parts LOOP
                    m := m || jsonb_build_object(p, COALESCE(member -> p, 'null'::jsonb));
                END LOOP;
            END IF;
            CONTINUE WHEN NOT EXISTS (SELECT 1 FROM jsonb_each(m) AS e WHERE jsonb_typeof(e.value) <> 'null');
            arr := arr || jsonb_build_array(m);
        END LOOP;
        IF NOT fits THEN
            extra := extra || jsonb_build_object(k, v);
        ELSIF jsonb_array_length(arr) = 0 THEN
            result := result || jsonb_build_object(k, 'null'::jsonb);
        ELSE
            result := result || jsonb_build_object(k, arr);
        END IF;
    END LOOP;
    IF extra <> '{}' THEN
        result := result || jsonb_build_object('VERBATIM', extra);
    END IF;
    RETURN result;
END;
$$;
-- +goose StatementEnd

UPDATE ref_data SET doc = pg_temp.ref_v2_doc(type, doc)
WHERE doc IS DISTINCT FROM pg_temp.ref_v2_doc(type, doc);
DROP FUNCTION pg_temp.ref_v2_doc(text, jsonb);
DROP FUNCTION pg_temp.ref_v2_wrap(jsonb);

COMMENT ON TABLE ref_data IS 'msgexchange ref_data contract version 2 (docs/message-types.md, "The ref_data contract")';

-- +goose Down
-- Back to the version-1 shape as far as it can be told from a version-2
-- document: one-member arrays of the repeatable fields become their
-- member, null "#text" of attribute members is removed, and the VERBATIM
-- entries return to the top level.
-- +goose StatementBegin
CREATE FUNCTION pg_temp.ref_v1_doc(doc jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    result jsonb := '{}';
    k      text;
    v      jsonb;
BEGIN
    FOR k, v IN SELECT e.key, e.value FROM jsonb_each(doc - 'VERBATIM') AS e
                UNION ALL SELECT e.key, e.value FROM jsonb_each(COALESCE(doc -> 'VERBATIM', '{}')) AS e LOOP
        IF jsonb_typeof(v) = 'array' THEN
            v := (SELECT jsonb_agg(CASE WHEN jsonb_typeof(a.value) = 'object' AND a.value -> '#text' = 'null'::jsonb
                                        THEN a.value - '#text' ELSE a.value END ORDER BY a.ord)
                  FROM jsonb_array_elements(v) WITH ORDINALITY AS a(value, ord));
            IF jsonb_array_length(v) = 1 THEN
                v := v -> 0;
            END IF;
        END IF;
        result := result || jsonb_build_object(k, v);
    END LOOP;
    RETURN result;
END;
$$;
-- +goose StatementEnd
UPDATE ref_data SET doc = pg_temp.ref_v1_doc(doc);
DROP FUNCTION pg_temp.ref_v1_doc(jsonb);
COMMENT ON TABLE ref_data IS NULL;
