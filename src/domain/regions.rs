//! Regions as people and the post write them, where the dataset writes them otherwise
//! (issue 34): a `state` filter names a region by its official name, its romanised name or
//! its common short form, and GeoNames writes one of them (`Tokyo To` for `東京都` and
//! `Tokyo`; `Distrito Federal`, renamed `Ciudad de México` in 2016). One table, read by
//! every state filter of city search (docs/city.md, "State names").

use std::collections::HashMap;
use std::sync::LazyLock;

use super::text::fold;

/// (country, another name of a region, the region's admin name1 in the dataset).
/// JP: each prefecture as Japan writes it (kanji) and without its suffix (`Aichi`, and
/// `Gunma`, which GeoNames spells `Gumma`); the data's own `Aichi Ken` already matches.
/// MX: SEPOMEX's names (`Ciudad de México`) and the short forms of the long official names.
pub const REGION_NAMES: &[(&str, &str, &str)] = &[
    ("JP", "北海道", "Hokkaido"),
    ("JP", "青森県", "Aomori Ken"),
    ("JP", "Aomori", "Aomori Ken"),
    ("JP", "岩手県", "Iwate Ken"),
    ("JP", "Iwate", "Iwate Ken"),
    ("JP", "宮城県", "Miyagi Ken"),
    ("JP", "Miyagi", "Miyagi Ken"),
    ("JP", "秋田県", "Akita Ken"),
    ("JP", "Akita", "Akita Ken"),
    ("JP", "山形県", "Yamagata Ken"),
    ("JP", "Yamagata", "Yamagata Ken"),
    ("JP", "福島県", "Fukushima Ken"),
    ("JP", "Fukushima", "Fukushima Ken"),
    ("JP", "茨城県", "Ibaraki Ken"),
    ("JP", "Ibaraki", "Ibaraki Ken"),
    ("JP", "栃木県", "Tochigi Ken"),
    ("JP", "Tochigi", "Tochigi Ken"),
    ("JP", "群馬県", "Gumma Ken"),
    ("JP", "Gunma", "Gumma Ken"),
    ("JP", "Gunma Ken", "Gumma Ken"),
    ("JP", "Gumma", "Gumma Ken"),
    ("JP", "埼玉県", "Saitama Ken"),
    ("JP", "Saitama", "Saitama Ken"),
    ("JP", "千葉県", "Chiba Ken"),
    ("JP", "Chiba", "Chiba Ken"),
    ("JP", "東京都", "Tokyo To"),
    ("JP", "Tokyo", "Tokyo To"),
    ("JP", "神奈川県", "Kanagawa Ken"),
    ("JP", "Kanagawa", "Kanagawa Ken"),
    ("JP", "新潟県", "Niigata Ken"),
    ("JP", "Niigata", "Niigata Ken"),
    ("JP", "富山県", "Toyama Ken"),
    ("JP", "Toyama", "Toyama Ken"),
    ("JP", "石川県", "Ishikawa Ken"),
    ("JP", "Ishikawa", "Ishikawa Ken"),
    ("JP", "福井県", "Fukui Ken"),
    ("JP", "Fukui", "Fukui Ken"),
    ("JP", "山梨県", "Yamanashi Ken"),
    ("JP", "Yamanashi", "Yamanashi Ken"),
    ("JP", "長野県", "Nagano Ken"),
    ("JP", "Nagano", "Nagano Ken"),
    ("JP", "岐阜県", "Gifu Ken"),
    ("JP", "Gifu", "Gifu Ken"),
    ("JP", "静岡県", "Shizuoka Ken"),
    ("JP", "Shizuoka", "Shizuoka Ken"),
    ("JP", "愛知県", "Aichi Ken"),
    ("JP", "Aichi", "Aichi Ken"),
    ("JP", "三重県", "Mie Ken"),
    ("JP", "Mie", "Mie Ken"),
    ("JP", "滋賀県", "Shiga Ken"),
    ("JP", "Shiga", "Shiga Ken"),
    ("JP", "京都府", "Kyoto Fu"),
    ("JP", "Kyoto", "Kyoto Fu"),
    ("JP", "大阪府", "Osaka Fu"),
    ("JP", "Osaka", "Osaka Fu"),
    ("JP", "兵庫県", "Hyogo Ken"),
    ("JP", "Hyogo", "Hyogo Ken"),
    ("JP", "奈良県", "Nara Ken"),
    ("JP", "Nara", "Nara Ken"),
    ("JP", "和歌山県", "Wakayama Ken"),
    ("JP", "Wakayama", "Wakayama Ken"),
    ("JP", "鳥取県", "Tottori Ken"),
    ("JP", "Tottori", "Tottori Ken"),
    ("JP", "島根県", "Shimane Ken"),
    ("JP", "Shimane", "Shimane Ken"),
    ("JP", "岡山県", "Okayama Ken"),
    ("JP", "Okayama", "Okayama Ken"),
    ("JP", "広島県", "Hiroshima Ken"),
    ("JP", "Hiroshima", "Hiroshima Ken"),
    ("JP", "山口県", "Yamaguchi Ken"),
    ("JP", "Yamaguchi", "Yamaguchi Ken"),
    ("JP", "徳島県", "Tokushima Ken"),
    ("JP", "Tokushima", "Tokushima Ken"),
    ("JP", "香川県", "Kagawa Ken"),
    ("JP", "Kagawa", "Kagawa Ken"),
    ("JP", "愛媛県", "Ehime Ken"),
    ("JP", "Ehime", "Ehime Ken"),
    ("JP", "高知県", "Kochi Ken"),
    ("JP", "Kochi", "Kochi Ken"),
    ("JP", "福岡県", "Fukuoka Ken"),
    ("JP", "Fukuoka", "Fukuoka Ken"),
    ("JP", "佐賀県", "Saga Ken"),
    ("JP", "Saga", "Saga Ken"),
    ("JP", "長崎県", "Nagasaki Ken"),
    ("JP", "Nagasaki", "Nagasaki Ken"),
    ("JP", "熊本県", "Kumamoto Ken"),
    ("JP", "Kumamoto", "Kumamoto Ken"),
    ("JP", "大分県", "Oita Ken"),
    ("JP", "Oita", "Oita Ken"),
    ("JP", "宮崎県", "Miyazaki Ken"),
    ("JP", "Miyazaki", "Miyazaki Ken"),
    ("JP", "鹿児島県", "Kagoshima Ken"),
    ("JP", "Kagoshima", "Kagoshima Ken"),
    ("JP", "沖縄県", "Okinawa Ken"),
    ("JP", "Okinawa", "Okinawa Ken"),
    ("MX", "Ciudad de México", "Distrito Federal"),
    ("MX", "CDMX", "Distrito Federal"),
    ("MX", "Mexico City", "Distrito Federal"),
    ("MX", "D.F.", "Distrito Federal"),
    ("MX", "Coahuila", "Coahuila de Zaragoza"),
    ("MX", "Michoacán", "Michoacán de Ocampo"),
    ("MX", "Veracruz", "Veracruz de Ignacio de la Llave"),
    ("MX", "Estado de México", "México"),
    ("MX", "Edomex", "México"),
    ("MX", "Querétaro de Arteaga", "Querétaro"),
];

/// Country -> folded other name -> folded admin name1 of the dataset.
static BY_NAME: LazyLock<HashMap<&'static str, HashMap<String, String>>> = LazyLock::new(|| {
    let mut by_name: HashMap<&'static str, HashMap<String, String>> = HashMap::new();
    for (country, other, data) in REGION_NAMES {
        by_name
            .entry(country)
            .or_default()
            .insert(fold(other), fold(data));
    }
    by_name
});

/// The region a folded `state` of `country` names, as the dataset writes it (folded);
/// `state` itself when the table knows no other name.
pub fn data_name<'a>(country: &str, state: &'a str) -> &'a str {
    BY_NAME
        .get(country)
        .and_then(|names| names.get(state))
        .map_or(state, String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_found_by_its_official_romanised_and_short_names() {
        assert_eq!(data_name("JP", &fold("東京都")), "tokyo to");
        assert_eq!(data_name("JP", &fold("Tokyo")), "tokyo to");
        assert_eq!(data_name("JP", &fold("Gunma")), "gumma ken");
        assert_eq!(
            data_name("MX", &fold("Ciudad de México")),
            "distrito federal"
        );
        assert_eq!(data_name("MX", &fold("CDMX")), "distrito federal");
        // Unknown names and other countries are left as asked.
        assert_eq!(data_name("JP", "tokyo to"), "tokyo to");
        assert_eq!(data_name("US", "tokyo"), "tokyo");
    }

    #[test]
    fn every_other_name_is_unique_and_not_a_name_of_the_data() {
        let mut seen = std::collections::HashSet::new();
        for (country, other, data) in REGION_NAMES {
            assert!(seen.insert((country, fold(other))), "{other} twice");
            assert!(
                !REGION_NAMES
                    .iter()
                    .any(|(c, _, d)| c == country && fold(d) == fold(other)),
                "{other} is a region's own name"
            );
            assert_ne!(fold(other), fold(data));
        }
    }
}
