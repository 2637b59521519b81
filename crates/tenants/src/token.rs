//! A tenant's token read as the verifier needs it, without copying it: the JOSE header's
//! `alg`, `typ` and `kid` (RFC 7515 §4.1), and the claims as values borrowed from the
//! decoded payload (RFC 7519 §4). Decoding into `jsonwebtoken::Header` and a
//! `serde_json::Map` cost a fifth of a warm verification (issue 15's benchmark).
//!
//! What is refused, and the words, stay jsonwebtoken's: a header with any other member,
//! with an escape in a string, or longer than [`HEADER_BYTES`], is read by
//! [`jsonwebtoken::decode_header`] itself; the claims go through serde_json's parser as
//! into a `serde_json::Map<String, Value>` (every value checked alike, an object in a
//! claim read as a `serde_json::Value`, a name given twice meaning its last value).

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use jsonwebtoken::errors::{Error, ErrorKind};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// The most bytes of a decoded header read here (the kid of a provider's header fits
/// many times); a longer one is left to jsonwebtoken.
pub const HEADER_BYTES: usize = 256;

/// A JWS compact serialization's parts (RFC 7515 §7.1), split at its last two dots as
/// jsonwebtoken splits it.
pub struct Parts<'t> {
    token: &'t str,
    header: &'t str,
    payload: &'t str,
    /// The signing input: the header and the payload, still base64url, and the dot
    /// between them.
    pub message: &'t str,
    /// The signature, base64url.
    pub signature: &'t str,
}

impl<'t> Parts<'t> {
    /// `token`'s parts.
    ///
    /// Errors: jsonwebtoken's `InvalidToken` without two dots.
    pub fn split(token: &'t str) -> Result<Self, Error> {
        let (message, signature) = token.rsplit_once('.').ok_or(ErrorKind::InvalidToken)?;
        let (header, payload) = message.rsplit_once('.').ok_or(ErrorKind::InvalidToken)?;
        Ok(Self {
            token,
            header,
            payload,
            message,
            signature,
        })
    }

    /// The header: decoded into `buffer` when it holds only `alg`, `typ` and `kid`
    /// without escapes (as providers write it), else by [`jsonwebtoken::decode_header`].
    ///
    /// Errors: jsonwebtoken's, as `decode_header` gives them.
    pub fn header<'h>(&self, buffer: &'h mut [u8; HEADER_BYTES]) -> Result<Header<'h>, Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Plain<'a> {
            alg: Algorithm,
            #[serde(borrow)]
            typ: Option<&'a str>,
            #[serde(borrow)]
            kid: Option<&'a str>,
        }
        let length = URL_SAFE_NO_PAD.decode_slice(self.header, buffer).ok();
        let buffer: &'h [u8] = buffer;
        // An object: serde_json reads a struct from an array too, which a header is not.
        let plain = length
            .map(|length| &buffer[..length])
            .filter(|json| json.first() == Some(&b'{'))
            .and_then(|json| serde_json::from_slice::<Plain>(json).ok());
        if let Some(plain) = plain {
            return Ok(Header {
                alg: plain.alg,
                typ: plain.typ.map(Cow::Borrowed),
                kid: plain.kid.map(Cow::Borrowed),
            });
        }
        let header = jsonwebtoken::decode_header(self.token)?;
        Ok(Header {
            alg: header.alg,
            typ: header.typ.map(Cow::Owned),
            kid: header.kid.map(Cow::Owned),
        })
    }

    /// The payload, base64url-decoded: the bytes [`Claims::parse`] reads.
    ///
    /// Errors: jsonwebtoken's, as `insecure_decode_claims` gives them.
    pub fn payload(&self) -> Result<Vec<u8>, Error> {
        Ok(URL_SAFE_NO_PAD.decode(self.payload)?)
    }
}

/// The header members the verifier reads.
pub struct Header<'h> {
    /// `alg`.
    pub alg: Algorithm,
    /// `typ`, if any.
    pub typ: Option<Cow<'h, str>>,
    /// `kid`, if any.
    pub kid: Option<Cow<'h, str>>,
}

/// A token's claims, in their order.
pub struct Claims<'c>(Vec<(Cow<'c, str>, ClaimValue<'c>)>);

impl<'c> Claims<'c> {
    /// The claims of `payload` (a JSON object).
    ///
    /// Errors: jsonwebtoken's, as `insecure_decode_claims` into a JSON map gives them.
    pub fn parse(payload: &'c [u8]) -> Result<Self, Error> {
        Ok(serde_json::from_slice(payload)?)
    }

    /// The value of the claim `name`: its last, when the token gives it twice (as a map
    /// keeps it).
    pub fn get(&self, name: &str) -> Option<&ClaimValue<'c>> {
        self.0
            .iter()
            .rev()
            .find(|(claim, _)| claim == name)
            .map(|(_, value)| value)
    }
}

/// A claim's value, as far as the verifier reads it.
pub enum ClaimValue<'c> {
    /// `null`.
    Null,
    /// A string.
    Text(Cow<'c, str>),
    /// A non-negative integer (what `serde_json::Value::as_u64` reads).
    Unsigned(u64),
    /// A list.
    List(Vec<ClaimValue<'c>>),
    /// A boolean, a negative or fractional number, or an object.
    Other,
}

impl ClaimValue<'_> {
    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Text(text) => Some(text),
            _ => None,
        }
    }

    /// The non-negative integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Unsigned(number) => Some(*number),
            _ => None,
        }
    }
}

impl From<serde_json::Value> for ClaimValue<'_> {
    fn from(value: serde_json::Value) -> Self {
        match value {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::String(text) => Self::Text(Cow::Owned(text)),
            serde_json::Value::Number(number) => {
                number.as_u64().map_or(Self::Other, Self::Unsigned)
            }
            serde_json::Value::Array(items) => {
                Self::List(items.into_iter().map(Self::from).collect())
            }
            serde_json::Value::Bool(_) | serde_json::Value::Object(_) => Self::Other,
        }
    }
}

impl<'de> Deserialize<'de> for Claims<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> Visitor<'de> for Object {
            type Value = Claims<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                // serde_json::Map's words, in "invalid type: …, expected a map".
                formatter.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Claims<'de>, A::Error> {
                let mut claims = Vec::with_capacity(16);
                while let Some(Text(name)) = map.next_key()? {
                    claims.push((name, map.next_value()?));
                }
                Ok(Claims(claims))
            }
        }
        deserializer.deserialize_map(Object)
    }
}

/// A string, borrowed unless it has escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Text<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

impl<'de> Deserialize<'de> for ClaimValue<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = ClaimValue<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("any valid JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Null)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Other)
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Unsigned(number))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<ClaimValue<'de>, E> {
                // serde_json::Number keeps a non-negative i64 as a u64 (`-0` is 0).
                Ok(u64::try_from(number).map_or(ClaimValue::Other, ClaimValue::Unsigned))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Other)
            }
            fn visit_borrowed_str<E: de::Error>(
                self,
                text: &'de str,
            ) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ClaimValue<'de>, E> {
                Ok(ClaimValue::Text(Cow::Owned(text.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ClaimValue<'de>, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(ClaimValue::List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ClaimValue<'de>, A::Error> {
                // As serde_json::Value reads it (which, with serde_json's `raw_value`, is
                // not always an object).
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ClaimValue::from(value))
            }
        }
        deserializer.deserialize_any(Any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    fn token(header: &[u8], payload: &[u8]) -> String {
        format!(
            "{}.{}.c2ln",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        )
    }

    /// What the verifier can read of a value, alike for both.
    fn ours(value: &ClaimValue) -> Value {
        match value {
            ClaimValue::Null => Value::Null,
            ClaimValue::Text(text) => json!(text),
            ClaimValue::Unsigned(number) => json!(number),
            ClaimValue::List(items) => items.iter().map(ours).collect(),
            ClaimValue::Other => json!("(other)"),
        }
    }

    fn theirs(value: &Value) -> Value {
        match value {
            Value::Null | Value::String(_) => value.clone(),
            Value::Number(number) if number.is_u64() => value.clone(),
            Value::Array(items) => items.iter().map(theirs).collect(),
            _ => json!("(other)"),
        }
    }

    /// The claims as read here, or the refusal, against jsonwebtoken's reading into a map.
    fn same_claims(token: &str) {
        let read = Parts::split(token).and_then(|parts| {
            let payload = parts.payload()?;
            let claims = Claims::parse(&payload)?;
            let mut names = vec!["absent".to_owned()];
            names.extend(
                jsonwebtoken::dangerous::insecure_decode_claims::<Map<String, Value>>(token)
                    .map(|map| map.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default(),
            );
            Ok(names
                .into_iter()
                .filter_map(|name| Some((name.clone(), ours(claims.get(&name)?))))
                .collect::<Map<_, _>>())
        });
        let expected = jsonwebtoken::dangerous::insecure_decode_claims::<Map<String, Value>>(token)
            .map(|map| map.iter().map(|(k, v)| (k.clone(), theirs(v))).collect());
        assert_eq!(
            read.map_err(|e| e.to_string()),
            expected.map_err(|e| e.to_string()),
            "{token}"
        );
    }

    #[test]
    fn claims_read_as_a_json_map_reads_them_and_are_refused_in_its_words() {
        let mut deep = "[".repeat(200);
        deep.push_str(&"]".repeat(200));
        let payloads: Vec<Vec<u8>> = [
            r#"{"iss":"https://idp","sub":"a","aud":"x","exp":1,"nbf":-0,"roles":["a",1,null,["b"],{"c":1}]}"#,
            r#"{"exp":-1,"nbf":1.0,"big":18446744073709551615,"t":true,"o":{"p":[1,{"q":null}]}}"#,
            r#"{"sub":"first","sub":"second","sub":null}"#,
            r#"{"k\u0069d":"caf\u00e9 \"quoted\"","\ud83d\ude00":"\n"}"#,
            r#"{}"#,
            r#"  { "iss" : "spaced" }  "#,
            r#"{"big":1e400}"#,
            r#"{"s":"\ud800"}"#,
            r#"{"s":"\q"}"#,
            r#"{"o":{"$serde_json::private::RawValue":"[1"}}"#,
            r#"{"o":{"$serde_json::private::RawValue":"[1]"}}"#,
            r#"{"aud":[{"$serde_json::private::RawValue":"\"x\""}]}"#,
            r#"{"a":1} trailing"#,
            r#"{"a":1,}"#,
            r#"{"a":tru}"#,
            r#"{1:2}"#,
            r#"[{"iss":"x"}]"#,
            r#"null"#,
            r#""iss""#,
            r#"7"#,
            "",
        ]
        .iter()
        .map(|text| text.as_bytes().to_vec())
        .chain([
            b"{\"s\":\"\xff\"}".to_vec(),
            b"{\"s\":\"a\x01b\"}".to_vec(),
            format!(r#"{{"deep":{deep}}}"#).into_bytes(),
        ])
        .collect();
        for payload in payloads {
            same_claims(&token(br#"{"alg":"RS256"}"#, &payload));
        }
        for token in [
            "no-dots",
            "one.dot",
            "a.!!!.c",
            "a.eyJhIjoxfQ==.c",
            "a.eyJhIjoxfR.c",
            "a.b.c.eyJhIjoxfQ.d",
        ] {
            same_claims(token);
        }
    }

    /// The header as read here, or the refusal, against jsonwebtoken's `decode_header`.
    fn same_header(token: &str) {
        let mut buffer = [0; HEADER_BYTES];
        let read = Parts::split(token)
            .and_then(|parts| {
                let header = parts.header(&mut buffer)?;
                Ok((
                    header.alg,
                    header.typ.map(Cow::into_owned),
                    header.kid.map(Cow::into_owned),
                ))
            })
            .map_err(|e| e.to_string());
        let expected = jsonwebtoken::decode_header(token)
            .map(|header| (header.alg, header.typ, header.kid))
            .map_err(|e| e.to_string());
        assert_eq!(read, expected, "{token}");
    }

    #[test]
    fn headers_read_as_jsonwebtoken_reads_them_and_are_refused_in_its_words() {
        let long_kid = format!(r#"{{"alg":"RS256","kid":"{}"}}"#, "k".repeat(300));
        for header in [
            r#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#,
            r#"{"kid":"k1","alg":"ES256"}"#,
            r#"{"alg":"EdDSA","typ":null,"kid":null}"#,
            r#"{"alg":"PS384","kid":"k\u0031","typ":"J\u0057T"}"#,
            r#"{"alg":"RS256","cty":"JWT","x5t":"abc","custom":[1]}"#,
            r#"{"alg":"RS256","jwk":"not a key"}"#,
            r#"{"alg":"RS256","crit":["exp"]}"#,
            r#"{"alg":"RS256","kid":"a","kid":"b"}"#,
            r#"{"alg":"RS256","typ":5}"#,
            r#"{"alg":{"RS256":null}}"#,
            r#"{"alg":"none"}"#,
            r#"{"alg":"HS256","typ":"JWT"}"#,
            r#"{"typ":"JWT"}"#,
            r#"{"alg":"RS256"} x"#,
            r#"["RS256"]"#,
            r#"["RS256","JWT","k1"]"#,
            r#"["RS256",null,null]"#,
            r#" {"alg":"RS256"}"#,
            long_kid.as_str(),
        ] {
            same_header(&token(header.as_bytes(), b"{}"));
        }
        for token in [
            "no-dots",
            "one.dot",
            "!!!.e30.c",
            "eyJhbGciOiJSUzI1NiJ9==.e30.c",
            "a.b.e30.c",
        ] {
            same_header(token);
        }
    }
}
