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
/// DE, PL, IT, ES, NL, CH, BE, AT, FR: the official names, in each official language (the
/// bilingual forms with `/` as the countries write them), and the English ones, where the
/// dataset writes another (docs/city.md, "State names").
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
    // The dataset writes some of DE's Länder twice, in German and in English (`Bayern` and
    // `Bavaria`, each with codes of its own): both, and the English names, are the one
    // Land.
    ("DE", "Bavaria", "Bayern"),
    ("DE", "Lower Saxony", "Niedersachsen"),
    ("DE", "Saxony", "Sachsen"),
    ("DE", "Saxony-Anhalt", "Sachsen-Anhalt"),
    ("DE", "Thuringia", "Thüringen"),
    ("DE", "Land Berlin", "Berlin"),
    (
        "DE",
        "Mecklenburg-Western Pomerania",
        "Mecklenburg-Vorpommern",
    ),
    ("DE", "Hesse", "Hessen"),
    ("DE", "North Rhine-Westphalia", "Nordrhein-Westfalen"),
    ("DE", "Rhineland-Palatinate", "Rheinland-Pfalz"),
    // PL: the voivodeships as Poland names them (the dataset writes English names).
    ("PL", "Wielkopolskie", "Greater Poland"),
    ("PL", "Kuyavia-Pomerania", "Kujawsko-Pomorskie"),
    ("PL", "Małopolskie", "Lesser Poland"),
    ("PL", "Dolnośląskie", "Lower Silesia"),
    ("PL", "Lubelskie", "Lublin"),
    ("PL", "Lubuskie", "Lubusz"),
    ("PL", "Mazowieckie", "Mazovia"),
    ("PL", "Opolskie", "Opole Voivodeship"),
    ("PL", "Podlaskie", "Podlasie"),
    ("PL", "Pomorskie", "Pomerania"),
    ("PL", "Śląskie", "Silesia"),
    ("PL", "Podkarpackie", "Subcarpathia"),
    ("PL", "Warmińsko-Mazurskie", "Warmia-Masuria"),
    ("PL", "Zachodniopomorskie", "West Pomerania"),
    ("PL", "Łódzkie", "Łódź Voivodeship"),
    // IT: the official names and the English ones.
    ("IT", "Abruzzo", "Abruzzi"),
    ("IT", "Lombardy", "Lombardia"),
    ("IT", "Piedmont", "Piemonte"),
    ("IT", "Apulia", "Puglia"),
    ("IT", "Sardinia", "Sardegna"),
    ("IT", "Sicily", "Sicilia"),
    ("IT", "Tuscany", "Toscana"),
    ("IT", "Aosta Valley", "Valle D'Aosta"),
    ("IT", "Trentino-South Tyrol", "Trentino-Alto Adige"),
    // IT: the two bilingual regions as ISTAT writes them, and each of their other
    // languages' names (issue 52); Friuli's in Slovene and Friulian.
    ("IT", "Valle d'Aosta/Vallée d'Aoste", "Valle D'Aosta"),
    ("IT", "Vallée d'Aoste", "Valle D'Aosta"),
    ("IT", "Trentino-Alto Adige/Südtirol", "Trentino-Alto Adige"),
    ("IT", "Trentino-Südtirol", "Trentino-Alto Adige"),
    (
        "IT",
        "Furlanija - Julijska krajina",
        "Friuli-Venezia Giulia",
    ),
    ("IT", "Friûl-Vignesie Julie", "Friuli-Venezia Giulia"),
    // ES: the official names (the dataset writes them without accents or articles) and
    // the English ones.
    ("ES", "Andalusia", "Andalucia"),
    ("ES", "Balearic Islands", "Baleares"),
    ("ES", "Illes Balears", "Baleares"),
    ("ES", "Canary Islands", "Canarias"),
    ("ES", "Castilla y León", "Castilla - Leon"),
    ("ES", "Castile and León", "Castilla - Leon"),
    ("ES", "Castile-La Mancha", "Castilla - La Mancha"),
    ("ES", "Catalonia", "Cataluna"),
    ("ES", "Catalunya", "Cataluna"),
    ("ES", "Comunitat Valenciana", "Comunidad Valenciana"),
    ("ES", "Valencian Community", "Comunidad Valenciana"),
    ("ES", "Comunidad de Madrid", "Madrid"),
    ("ES", "Región de Murcia", "Murcia"),
    ("ES", "Navarre", "Navarra"),
    ("ES", "Basque Country", "Pais Vasco"),
    ("ES", "Euskadi", "Pais Vasco"),
    ("ES", "País Vasco/Euskadi", "Pais Vasco"),
    ("ES", "Principado de Asturias", "Asturias"),
    ("ES", "Islas Baleares", "Baleares"),
    ("ES", "Comunidad Foral de Navarra", "Navarra"),
    ("ES", "Nafarroa", "Navarra"),
    ("ES", "Galiza", "Galicia"),
    // FR: the regions' other official and English names (the dataset writes INSEE's).
    ("FR", "Région Sud", "Provence-Alpes-Côte d'Azur"),
    ("FR", "Brittany", "Bretagne"),
    ("FR", "Normandy", "Normandie"),
    ("FR", "Corsica", "Corse"),
    ("FR", "Burgundy-Franche-Comté", "Bourgogne-Franche-Comté"),
    // NL: the provinces as the Netherlands names them (the dataset writes English).
    ("NL", "Gelderland", "Guelders"),
    ("NL", "Noord-Brabant", "North Brabant"),
    ("NL", "Noord-Holland", "North Holland"),
    ("NL", "Zuid-Holland", "South Holland"),
    ("NL", "Fryslân", "Friesland"),
    // CH: the cantons without `Kanton`/`Canton de`, in their languages and English.
    ("CH", "Aargau", "Kanton Aargau"),
    (
        "CH",
        "Appenzell Ausserrhoden",
        "Kanton Appenzell Ausserrhoden",
    ),
    (
        "CH",
        "Appenzell Innerrhoden",
        "Kanton Appenzell Innerrhoden",
    ),
    ("CH", "Basel-Landschaft", "Kanton Basel-Landschaft"),
    ("CH", "Basel-Stadt", "Kanton Basel-Stadt"),
    ("CH", "Bern", "Canton de Berne"),
    ("CH", "Berne", "Canton de Berne"),
    ("CH", "Fribourg", "Canton de Fribourg"),
    ("CH", "Freiburg", "Canton de Fribourg"),
    ("CH", "Geneva", "Genève"),
    ("CH", "Genf", "Genève"),
    ("CH", "Glarus", "Kanton Glarus"),
    ("CH", "Graubünden", "Kanton Graubünden"),
    ("CH", "Grisons", "Kanton Graubünden"),
    ("CH", "Luzern", "Kanton Luzern"),
    ("CH", "Lucerne", "Kanton Luzern"),
    ("CH", "Nidwalden", "Kanton Nidwalden"),
    ("CH", "Obwalden", "Kanton Obwalden"),
    ("CH", "Schaffhausen", "Kanton Schaffhausen"),
    ("CH", "Schwyz", "Kanton Schwyz"),
    ("CH", "Solothurn", "Kanton Solothurn"),
    ("CH", "St. Gallen", "Kanton St. Gallen"),
    ("CH", "Thurgau", "Kanton Thurgau"),
    ("CH", "Tessin", "Ticino"),
    ("CH", "Uri", "Kanton Uri"),
    ("CH", "Valais", "Canton du Valais"),
    ("CH", "Wallis", "Canton du Valais"),
    ("CH", "Vaud", "Canton de Vaud"),
    ("CH", "Waadt", "Canton de Vaud"),
    ("CH", "Zug", "Kanton Zug"),
    ("CH", "Zürich", "Kanton Zürich"),
    // BE: the regions in Dutch, French and English.
    ("BE", "Brussels", "Bruxelles-Capitale"),
    ("BE", "Brussel", "Bruxelles-Capitale"),
    ("BE", "Bruxelles", "Bruxelles-Capitale"),
    ("BE", "Brussels-Capital Region", "Bruxelles-Capitale"),
    ("BE", "Flanders", "Vlaanderen"),
    ("BE", "Flandre", "Vlaanderen"),
    ("BE", "Wallonia", "Wallonie"),
    // BE: the regions' own official names, in Dutch, French and German, and the
    // bilingual form (issue 52).
    ("BE", "Vlaams Gewest", "Vlaanderen"),
    ("BE", "Région flamande", "Vlaanderen"),
    ("BE", "Flämische Region", "Vlaanderen"),
    ("BE", "Flandern", "Vlaanderen"),
    ("BE", "Flemish Region", "Vlaanderen"),
    ("BE", "Région wallonne", "Wallonie"),
    ("BE", "Waals Gewest", "Wallonie"),
    ("BE", "Wallonische Region", "Wallonie"),
    ("BE", "Wallonien", "Wallonie"),
    ("BE", "Walloon Region", "Wallonie"),
    ("BE", "Région de Bruxelles-Capitale", "Bruxelles-Capitale"),
    ("BE", "Brussels Hoofdstedelijk Gewest", "Bruxelles-Capitale"),
    ("BE", "Region Brüssel-Hauptstadt", "Bruxelles-Capitale"),
    (
        "BE",
        "Région de Bruxelles-Capitale/Brussels Hoofdstedelijk Gewest",
        "Bruxelles-Capitale",
    ),
    // AT: the Länder in English.
    ("AT", "Carinthia", "Kärnten"),
    ("AT", "Lower Austria", "Niederösterreich"),
    ("AT", "Upper Austria", "Oberösterreich"),
    ("AT", "Styria", "Steiermark"),
    ("AT", "Tyrol", "Tirol"),
    ("AT", "Vienna", "Wien"),
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

/// The other names (folded) of the region the dataset writes `data` (folded) in
/// `country`: the words of a query that may name it (`Kraków Małopolskie`).
pub fn other_names<'a>(country: &str, data: &'a str) -> impl Iterator<Item = &'static str> + 'a {
    BY_NAME
        .get(country)
        .into_iter()
        .flatten()
        .filter(move |(_, d)| d.as_str() == data)
        .map(|(other, _)| other.as_str())
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
        // One Land the dataset writes twice, and a name in each language.
        assert_eq!(data_name("DE", &fold("Bavaria")), "bayern");
        assert_eq!(data_name("PL", &fold("Mazowieckie")), "mazovia");
        assert_eq!(data_name("CH", &fold("Genf")), "geneve");
        assert_eq!(data_name("BE", &fold("Flanders")), "vlaanderen");
        // Official names as the countries write them (issue 52).
        assert_eq!(data_name("BE", &fold("Vlaams Gewest")), "vlaanderen");
        assert_eq!(data_name("BE", &fold("Région wallonne")), "wallonie");
        assert_eq!(
            data_name("BE", &fold("Région de Bruxelles-Capitale")),
            "bruxelles capitale"
        );
        assert_eq!(
            data_name("IT", &fold("Trentino-Alto Adige/Südtirol")),
            "trentino alto adige"
        );
        assert_eq!(
            data_name("IT", &fold("Valle d'Aosta/Vallée d'Aoste")),
            "valle daosta"
        );
        let mut others: Vec<&str> = other_names("PL", "lesser poland").collect();
        others.sort_unstable();
        assert_eq!(others, ["malopolskie"]);
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
